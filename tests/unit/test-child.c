/*
 * test-child.c - how a sandbox's child reports a failed step (engine/child.h).
 */
#include "common.h"
#include "caps.h"
#include "child.h"
#include "landlock.h"
#include "limits.h"
#include "seccomp.h"

#include <criterion/criterion.h>
#include <string.h>

Test(child, set_names_the_step_and_the_errno)
{
	struct pdk_child_error ce = {0};

	cr_assert_eq(pdk_child_error_set(&ce, ENOENT, "cannot open '%s'", "/x"), -ENOENT);
	cr_assert_eq(ce.err, ENOENT);
	cr_assert_str_eq(ce.msg, "cannot open '/x': No such file or directory");
}

Test(child, setx_has_no_errno_text)
{
	struct pdk_child_error ce = {0};

	cr_assert_eq(pdk_child_error_setx(&ce, EPROTO, "bad %d", 7), -EPROTO);
	cr_assert_str_eq(ce.msg, "bad 7");
}

Test(child, the_first_failure_wins)
{
	struct pdk_child_error ce = {0};

	(void)pdk_child_error_set(&ce, EPERM, "first");
	cr_assert_eq(pdk_child_error_set(&ce, EIO, "second"), -EIO, "the status is still returned");
	cr_assert_eq(ce.err, EPERM);
	cr_assert_str_eq(ce.msg, "first: Operation not permitted");
}

Test(child, zero_is_eio_and_null_records_nothing)
{
	struct pdk_child_error ce = {0};

	cr_assert_eq(pdk_child_error_setx(&ce, 0, "no errno"), -EIO);
	cr_assert_eq(ce.err, EIO);
	cr_assert_eq(pdk_child_error_set(NULL, EPERM, "nowhere"), -EPERM);
	cr_assert_eq(pdk_child_error_wrap(NULL, "mount"), -EIO);
}

Test(child, wrap_prefixes_the_step)
{
	struct pdk_child_error ce = {0};

	(void)pdk_child_error_set(&ce, EACCES, "cannot bind '%s' on '%s'", "/a", "/b");
	cr_assert_eq(pdk_child_error_wrap(&ce, "mount"), -EACCES);
	cr_assert_str_eq(ce.msg, "mount: cannot bind '/a' on '/b': Permission denied");
}

Test(child, long_messages_are_cut_not_overrun)
{
	struct pdk_child_error ce = {0};
	char path[2000];

	memset(path, 'p', sizeof(path) - 1);
	path[sizeof(path) - 1] = '\0';
	(void)pdk_child_error_set(&ce, ENAMETOOLONG, "cannot open '%s'", path);
	cr_assert_eq(strlen(ce.msg), sizeof(ce.msg) - 1);
	cr_assert_eq(pdk_child_error_wrap(&ce, "mount"), -ENAMETOOLONG);
	cr_assert_eq(strlen(ce.msg), sizeof(ce.msg) - 1);
	cr_assert_eq(strncmp(ce.msg, "mount: cannot open 'ppp", 23), 0);
}

/* Every child-side step says which step failed, with the errno's text. */
Test(child, steps_report_through_the_record)
{
	struct pdk_child_error ce = {0};

	cr_assert_eq(pdk_seccomp_apply_child(NULL, &ce), -EINVAL);
	cr_assert_str_eq(ce.msg, "cannot load seccomp filter: Invalid argument");
	ce = (struct pdk_child_error){0};
	cr_assert_eq(pdk_landlock_apply_child(NULL, &ce), -EINVAL);
	cr_assert_str_eq(ce.msg, "no Landlock ruleset: Invalid argument");
	ce = (struct pdk_child_error){0};
	cr_assert_eq(pdk_limits_apply_child(NULL, &ce), -EINVAL);
	cr_assert_str_eq(ce.msg, "no limits to apply");
	cr_assert_eq(ce.err, EINVAL);
}
