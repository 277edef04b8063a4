/*
 * Replays fuzz inputs through a target's LLVMFuzzerTestOneInput without the fuzzing engine, so
 * that every corpus runs as a plain test under any compiler and sanitizer (dav1d's way).
 *
 *   fuzz-replay-NAME PATH...
 * Each PATH is a file or a folder (every regular file in it, in name order). Fails when no input
 * was found: a replay that ran nothing proves nothing.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

static int replay_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (f == NULL) {
    perror(path);
    return -1;
  }
  size_t cap = 4096, len = 0;
  uint8_t* buf = malloc(cap);
  size_t r;
  while (buf != NULL && (r = fread(buf + len, 1, cap - len, f)) > 0) {
    len += r;
    if (len == cap) {
      uint8_t* grown = realloc(buf, cap * 2);
      if (grown == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = grown;
      cap *= 2;
    }
  }
  fclose(f);
  if (buf == NULL) {
    fprintf(stderr, "%s: out of memory\n", path);
    return -1;
  }
  LLVMFuzzerTestOneInput(buf, len);
  free(buf);
  return 1;
}

static int cmp(const void* a, const void* b) {
  return strcmp(*(char* const*)a, *(char* const*)b);
}

static int replay_path(const char* path) {
  struct stat st;
  if (stat(path, &st) != 0) {
    perror(path);
    return -1;
  }
  if (!S_ISDIR(st.st_mode)) return replay_file(path);
  DIR* d = opendir(path);
  if (d == NULL) {
    perror(path);
    return -1;
  }
  char** names = NULL;
  size_t n = 0, cap = 0;
  struct dirent* e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      char** grown = realloc(names, cap * sizeof(*names));
      if (grown == NULL) break;
      names = grown;
    }
    names[n++] = strdup(e->d_name);
  }
  closedir(d);
  qsort(names, n, sizeof(*names), cmp);
  int count = 0;
  for (size_t i = 0; i < n; i++) {
    char full[4096];
    snprintf(full, sizeof(full), "%s/%s", path, names[i]);
    struct stat fs;
    if (stat(full, &fs) == 0 && S_ISREG(fs.st_mode)) {
      int r = replay_file(full);
      if (r < 0) count = -1;
      if (count >= 0) count += r;
    }
    free(names[i]);
  }
  free(names);
  return count;
}

int main(int argc, char** argv) {
  int total = 0;
  for (int i = 1; i < argc; i++) {
    int r = replay_path(argv[i]);
    if (r < 0) return 1;
    total += r;
  }
  printf("replayed %d input(s)\n", total);
  if (total == 0) {
    fprintf(stderr, "no inputs found: a replay that ran nothing proves nothing\n");
    return 1;
  }
  return 0;
}
