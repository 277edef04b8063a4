/* The parameter table's inputs (core/base): NCCL_CONF_FILE lines and integer knob values. Every
 * line of the input is read as a conf-file line and as a value. */
#include "base.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  char* s = fuzz_cstr(data, size);
  char* line = s;
  while (*line != '\0') {
    char* next = fuzz_split(line);
    long long v;
    (void)param_int_parse(line, &v);
    char* key = NULL;
    char* val = NULL;
    if (param_conf_line(line, &key, &val)) {
      FUZZ_ASSERT(key[0] != '\0' && strchr(key, '=') == NULL);
      FUZZ_ASSERT(key[strlen(key) - 1] != ' ' && key[0] != ' ' && key[0] != '#');
    }
    line = next;
  }
  free(s);
  return 0;
}
