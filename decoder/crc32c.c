/* placeholder: to be written */
typedef int bfs_placeholder_crc32c;
