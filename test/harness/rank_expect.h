/*
 * For test code running in many processes or threads at once: EXPECT counts a failure in the
 * caller's local `bad` and says which rank (t_rank, set by the test) and process saw it.
 */
#ifndef CHOIR_TEST_RANK_EXPECT_H
#define CHOIR_TEST_RANK_EXPECT_H

#include <stdio.h>
#include <unistd.h>

static __thread int t_rank = -1;

#define EXPECT(cond)                                                                            \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      fprintf(stderr, "[rank %d pid %d] %s:%d: expected %s\n", t_rank, (int)getpid(), __FILE__, \
              __LINE__, #cond);                                                                 \
      bad++;                                                                                    \
    }                                                                                           \
  } while (0)

/* EXPECT with a printf-style explanation. */
#define EXPECT_MSG(cond, ...)                                                                   \
  do {                                                                                          \
    if (!(cond)) {                                                                              \
      fprintf(stderr, "[rank %d pid %d] %s:%d: expected %s: ", t_rank, (int)getpid(), __FILE__, \
              __LINE__, #cond);                                                                 \
      fprintf(stderr, __VA_ARGS__);                                                             \
      fputc('\n', stderr);                                                                      \
      bad++;                                                                                    \
    }                                                                                           \
  } while (0)

#endif
