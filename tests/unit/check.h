/*
** tests/unit/check.h - the check macro and the random numbers every C unit
** test uses. Each test is its own program: exit 0 pass, 77 skip, anything
** else fail; one line per failed check (the first 50), then a count.
**
**   CHECK(cond);                      FAIL file:line: cond
**   CHECK(cond, "fmt", args...);      FAIL file:line: cond: message
*/
#ifndef CSQ_TESTS_CHECK_H
#define CSQ_TESTS_CHECK_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

static int nFail = 0;
static int nCheck = 0;

/* The optional message of a failed CHECK ("" when none was given). */
static __attribute__((unused)) void check_note(const char *zFmt, ...) {
  if (!zFmt[0]) return;
  va_list ap;
  va_start(ap, zFmt);
  printf(": ");
  vprintf(zFmt, ap);
  va_end(ap);
}

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    nCheck++;                                                                                      \
    if (!(cond)) {                                                                                 \
      if (nFail < 50) {                                                                            \
        printf("FAIL %s:%d: %s", __FILE__, __LINE__, #cond);                                       \
        check_note("" __VA_ARGS__);                                                                \
        printf("\n");                                                                              \
      }                                                                                            \
      nFail++;                                                                                     \
    }                                                                                              \
  } while (0)

/* xorshift64*: reproducible test data; a test may reseed rng. */
static uint64_t rng = 0x9E3779B97F4A7C15ull;
static __attribute__((unused)) uint64_t rnd(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545F4914F6CDD1Dull;
}
static __attribute__((unused)) uint64_t rndn(uint64_t n) {
  return n ? rnd() % n : 0;
}

#endif /* CSQ_TESTS_CHECK_H */
