/*
 * Minimal assertion helpers for Choir's C tests. A failed check prints where and what, and makes
 * the test fail at the end; the test keeps going so one run shows every failure.
 *   CHECK_TRUE(cond), CHECK_EQ_INT(a, b), CHECK_EQ_STR(a, b), CHECK_CONTAINS(haystack, needle)
 *   CHECK_MSG(cond, fmt, ...)     with a printf-style explanation of what was checked
 *   CHECK_SKIPPED(fmt, ...)       a case that cannot run here (no IPv6 address, no second
 *                                 interface): prints why and counts a skip, never a pass
 *   return check_finish("name");   from main: prints a summary, returns 0, 1, or CHECK_SKIP when
 *                                 nothing but skipped cases ran
 * Exit code 77 (CHECK_SKIP) tells Meson the test was skipped.
 */
#ifndef CHOIR_TEST_CHECK_H
#define CHOIR_TEST_CHECK_H

#include <stdio.h>
#include <string.h>

#define CHECK_SKIP 77

static int check_failures_;
static int check_count_;
static int check_skips_;

#define CHECK_SKIPPED(...) \
  do {                     \
    check_skips_++;        \
    printf("skipped: ");   \
    printf(__VA_ARGS__);   \
    printf("\n");          \
  } while (0)

#define CHECK_TRUE(cond)                                                       \
  do {                                                                         \
    check_count_++;                                                            \
    if (!(cond)) {                                                             \
      check_failures_++;                                                       \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
    }                                                                          \
  } while (0)

/* Only the first CHECK_MSG_MAX failures are printed: a broken table check could print millions. */
#define CHECK_MSG_MAX 50
#define CHECK_MSG(cond, ...)                                                           \
  do {                                                                                 \
    check_count_++;                                                                    \
    if (!(cond)) {                                                                     \
      if (++check_failures_ <= CHECK_MSG_MAX) {                                        \
        fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);       \
        fprintf(stderr, __VA_ARGS__);                                                  \
        fprintf(stderr, "\n");                                                         \
      }                                                                                \
    }                                                                                  \
  } while (0)

#define CHECK_EQ_INT(a, b)                                                                  \
  do {                                                                                      \
    long long a_ = (long long)(a), b_ = (long long)(b);                                     \
    check_count_++;                                                                         \
    if (a_ != b_) {                                                                         \
      check_failures_++;                                                                    \
      fprintf(stderr, "%s:%d: check failed: %s == %s (%lld != %lld)\n", __FILE__, __LINE__, \
              #a, #b, a_, b_);                                                              \
    }                                                                                       \
  } while (0)

#define CHECK_EQ_STR(a, b)                                                                 \
  do {                                                                                     \
    const char *a_ = (a), *b_ = (b);                                                       \
    check_count_++;                                                                        \
    if (a_ == NULL || b_ == NULL || strcmp(a_, b_) != 0) {                                 \
      check_failures_++;                                                                   \
      fprintf(stderr, "%s:%d: check failed: %s == %s (\"%s\" != \"%s\")\n", __FILE__,      \
              __LINE__, #a, #b, a_ ? a_ : "(null)", b_ ? b_ : "(null)");                   \
    }                                                                                      \
  } while (0)

#define CHECK_CONTAINS(hay, needle)                                                        \
  do {                                                                                     \
    const char *h_ = (hay), *n_ = (needle);                                                \
    check_count_++;                                                                        \
    if (h_ == NULL || strstr(h_, n_) == NULL) {                                            \
      check_failures_++;                                                                   \
      fprintf(stderr, "%s:%d: check failed: \"%s\" does not contain \"%s\"\n", __FILE__,   \
              __LINE__, h_ ? h_ : "(null)", n_);                                           \
    }                                                                                      \
  } while (0)

static inline int check_finish(const char* name) {
  if (check_count_ == 0 && check_failures_ == 0 && check_skips_ > 0) {
    printf("%s: skipped: all %d case(s) need what this machine lacks (reasons above)\n", name,
           check_skips_);
    return CHECK_SKIP;
  }
  if (check_count_ == 0) {
    fprintf(stderr, "%s: no checks ran\n", name);
    return 1;
  }
  printf("%s: %d/%d checks passed", name, check_count_ - check_failures_, check_count_);
  if (check_skips_ > 0) printf(", %d case(s) skipped", check_skips_);
  printf("\n");
  return check_failures_ == 0 ? 0 : 1;
}

#endif
