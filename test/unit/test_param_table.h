/* The production table plus knobs that exist only in the tests, to cover every type. */
#include "base_param_table.h"
PARAM_INT(TEST_INT, "CHOIR_TEST_INT", 42, "integer knob used by the unit tests")
PARAM_INT(TEST_NEG, "CHOIR_TEST_NEG", -1, "integer knob with a negative default")
PARAM_STR(TEST_STR, "CHOIR_TEST_STR", "dflt", "string knob used by the unit tests")
