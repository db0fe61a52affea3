#include "common.h"
#include <criterion/criterion.h>
Test(util, placeholder) { cr_assert(1); }
