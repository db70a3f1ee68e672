/* placeholder: to be written */
typedef int bfs_placeholder_tf_example_pb_c;
