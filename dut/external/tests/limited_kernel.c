/* The C example plugin's kernel under other names, wrapped by limited_plugin.c. */
#define swa_dut_v2_describe c_plugin_describe
#define swa_dut_v2_prefill c_plugin_prefill
#define swa_dut_v2_chunked_prefill c_plugin_chunked_prefill
#include "../examples/c_plugin.c"
