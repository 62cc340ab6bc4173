/* Deliberately broken plugins for the loader's tests (ABI version 1, which still loads), selected at compile time:
 * BAD_MISSING_SYMBOLS exports only the version; BAD_ABI_VERSION reports version 3;
 * BAD_CRASH segfaults in prefill (and chunked prefill); BAD_ABORT aborts in decode_step;
 * BAD_HANG never returns from prefill (and chunked prefill); BAD_FORK forks in prefill and both processes
 * return (as a careless helper-spawning kernel would); BAD_EXIT calls exit(0) in prefill; BAD_DAEMON starts
 * a daemon in prefill (a double fork, a session of its own: "sleep 9873") and returns; BAD_NOISY prints
 * 256 KiB to stdout and to stderr in prefill (escape codes, bytes that are not UTF-8; more than a pipe
 * holds) and returns, and in decode_step prints a last coloured line and aborts.
 * Otherwise they write nothing. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "swa/dut_v1.h"

uint32_t swa_dut_v1_abi_version(void) {
#ifdef BAD_ABI_VERSION
  return 3u;
#else
  return SWA_DUT_V1_ABI_VERSION;
#endif
}

#ifndef BAD_MISSING_SYMBOLS
const char* swa_dut_v1_name(void) { return "bad"; }
int swa_dut_v1_supports(const swa_dut_v1_params* p, char* reason, size_t reason_len) {
  (void)p; (void)reason; (void)reason_len;
  return 1;
}
int swa_dut_v1_prefill(const swa_dut_v1_params* p, swa_dut_v1_error* error) {
  (void)error;
#ifdef BAD_CRASH
  volatile int* nowhere = (volatile int*)(uintptr_t)p->seq_lens[0] - (uintptr_t)p->seq_lens[0];
  *nowhere = 1;
#endif
#ifdef BAD_HANG
  for (;;) pause();
#endif
#ifdef BAD_FORK
  (void)fork();
#endif
#ifdef BAD_EXIT
  exit(0);
#endif
#ifdef BAD_NOISY
  for (int i = 0; i < 4096; ++i) {
    fprintf(i % 2 ? stdout : stderr, "\x1b[31mnoisy %d\xff\xfe\x1b]0;title\x07 %s\n", i,
            "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789");
  }
  fflush(stdout);
#endif
#ifdef BAD_DAEMON
  {
    pid_t middle = fork();
    if (middle == 0) {
      setsid();
      if (fork() == 0) {
        execl("/bin/sleep", "sleep", "9873", (char*)NULL);
        _exit(127);
      }
      _exit(0);
    }
    if (middle > 0) waitpid(middle, NULL, 0);
  }
#endif
  (void)p;
  return 0;
}
int swa_dut_v1_chunked_prefill(const swa_dut_v1_params* p, swa_dut_v1_cache* c, int i, swa_dut_v1_error* e) {
  (void)c; (void)i;
  return swa_dut_v1_prefill(p, e);
}
int swa_dut_v1_decode_step(const swa_dut_v1_params* p, swa_dut_v1_cache* c, int s, swa_dut_v1_error* e) {
  (void)p; (void)c; (void)s; (void)e;
#ifdef BAD_ABORT
  abort();
#endif
#ifdef BAD_NOISY
  fputs("\x1b[31mnoisy: giving up in decode\x1b[0m\n", stderr);
  abort();
#endif
  return 0;
}
#endif
