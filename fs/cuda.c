/* placeholder: the CUDA path arrives with its own issue */
typedef int bfs_placeholder_cuda;
