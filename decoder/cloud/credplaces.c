/* SPDX-License-Identifier: Apache-2.0 */
/*
 * credplaces.c — the table of credplaces.h: where each chain looks for
 * credentials, in its order (docs/credentials.md), and what it reads
 * there.
 */
#include "credplaces.h"

#define READS(...) ((const char *const[]){ __VA_ARGS__, NULL })

static const struct bfs_cred_place places[] = {
	{ "s3://", true, "the environment",
	  READS("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN") },
	{ "s3://", true, "a profile's role_arn (STS AssumeRole)",
	  READS("AWS_PROFILE", "role_arn", "source_profile", "credential_source",
		"AWS_ENDPOINT_URL_STS") },
	{ "s3://", true, "web identity (STS)",
	  READS("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_ROLE_SESSION_NAME",
		"web_identity_token_file") },
	{ "s3://", true, "the credentials file",
	  READS("AWS_SHARED_CREDENTIALS_FILE", "~/.aws/credentials") },
	{ "s3://", true, "credential_process", READS("credential_process") },
	{ "s3://", true, "the config file", READS("AWS_CONFIG_FILE", "~/.aws/config") },
	{ "s3://", true, "container credentials (ECS, EKS)",
	  READS("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_CONTAINER_AUTHORIZATION_TOKEN") },
	{ "s3://", true, "the instance metadata service (IMDSv2)",
	  READS("AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_V1_DISABLED",
		"AWS_EC2_METADATA_SERVICE_ENDPOINT", "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE",
		"AWS_METADATA_SERVICE_TIMEOUT", "AWS_METADATA_SERVICE_NUM_ATTEMPTS") },
	{ "gs://", true, "HMAC keys",
	  READS("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE") },
	{ "gs://", true, "GOOGLE_APPLICATION_CREDENTIALS (a service-account or user key)",
	  READS("GOOGLE_APPLICATION_CREDENTIALS") },
	{ "gs://", true, "gcloud's ADC file",
	  READS("CLOUDSDK_CONFIG", "~/.config/gcloud/application_default_credentials.json") },
	{ "gs://", true, "the metadata server", READS("GCE_METADATA_HOST", "GCE_METADATA_ROOT") },
	{ "", false, "the endpoint, region, TLS and retries",
	  READS("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_REGION", "AWS_DEFAULT_REGION",
		"AWS_CA_BUNDLE", "AWS_MAX_ATTEMPTS") },
};

const struct bfs_cred_place *bfs_cred_places(size_t *n)
{
	*n = sizeof(places) / sizeof(places[0]);
	return places;
}
