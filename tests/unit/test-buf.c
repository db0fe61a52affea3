/*
 * test-buf.c - the capped growable buffer (base/buf.h).
 */
#include "common.h"
#include "buf.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

Test(buf, empty_buffer_is_an_empty_string)
{
	struct pdk_buf b = PDK_BUF_INIT(16);

	cr_assert_eq(b.len, 0);
	cr_assert_null(b.p, "nothing allocated before the first byte");
	cr_assert_str_eq(pdk_buf_str(&b), "");
	pdk_buf_reset(&b);
	cr_assert_eq(pdk_buf_room(&b), 0);
	pdk_buf_release(&b);
}

Test(buf, appends_are_nul_terminated)
{
	_cleanup_buf_ struct pdk_buf b = PDK_BUF_INIT(64);

	cr_assert_eq(pdk_buf_addstr(&b, "hello"), 0);
	cr_assert_eq(pdk_buf_add(&b, ", ", 2), 0);
	cr_assert_eq(pdk_buf_addstr(&b, "world"), 0);
	cr_assert_eq(b.len, 12);
	cr_assert_str_eq(pdk_buf_str(&b), "hello, world");
	cr_assert_eq(b.p[b.len], '\0');
}

Test(buf, holds_bytes_with_nuls)
{
	_cleanup_buf_ struct pdk_buf b = PDK_BUF_INIT(64);
	static const char bytes[] = {'a', '\0', 'b', '\0', 'c'};

	cr_assert_eq(pdk_buf_add(&b, bytes, sizeof(bytes)), 0);
	cr_assert_eq(b.len, sizeof(bytes));
	cr_assert_eq(memcmp(b.p, bytes, sizeof(bytes)), 0);
	cr_assert_eq(b.p[b.len], '\0');
}

Test(buf, the_cap_is_hard)
{
	_cleanup_buf_ struct pdk_buf b = PDK_BUF_INIT(8);

	cr_assert_eq(pdk_buf_addstr(&b, "12345678"), 0, "exactly the cap fits");
	cr_assert_eq(pdk_buf_add(&b, "9", 1), -E2BIG);
	cr_assert_eq(b.len, 8, "a refused append adds nothing");
	cr_assert_str_eq(pdk_buf_str(&b), "12345678");
	cr_assert_eq(pdk_buf_add(&b, "", 0), 0, "an empty append always fits");
	cr_assert_leq(b.cap, 9, "never more memory than the cap and the NUL");
}

Test(buf, an_append_past_the_cap_adds_nothing)
{
	_cleanup_buf_ struct pdk_buf b = PDK_BUF_INIT(10);

	cr_assert_eq(pdk_buf_addstr(&b, "abcd"), 0);
	cr_assert_eq(pdk_buf_addstr(&b, "efghijk"), -E2BIG);
	cr_assert_str_eq(pdk_buf_str(&b), "abcd");
	cr_assert_eq(pdk_buf_addstr(&b, "efghij"), 0);
	cr_assert_str_eq(pdk_buf_str(&b), "abcdefghij");
}

Test(buf, a_zero_cap_holds_nothing)
{
	_cleanup_buf_ struct pdk_buf b;

	pdk_buf_init(&b, 0);
	cr_assert_eq(pdk_buf_add(&b, "", 0), 0);
	cr_assert_eq(pdk_buf_add(&b, "x", 1), -E2BIG);
	cr_assert_str_eq(pdk_buf_str(&b), "");
}

Test(buf, a_huge_request_does_not_wrap)
{
	_cleanup_buf_ struct pdk_buf b = PDK_BUF_INIT(SIZE_MAX);
	volatile size_t huge = SIZE_MAX - 3; /* not a constant: the inline copy is never reached */

	cr_assert_eq(pdk_buf_addstr(&b, "abc"), 0);
	cr_assert_eq(pdk_buf_reserve(&b, SIZE_MAX), -E2BIG);
	cr_assert_eq(pdk_buf_reserve(&b, SIZE_MAX - 2), -E2BIG);
	cr_assert_eq(pdk_buf_add(&b, "d", huge), -E2BIG);
	cr_assert_str_eq(pdk_buf_str(&b), "abc");
}

/* One byte at a time up to 1 MiB: few reallocations (amortised), and never past the cap. */
Test(buf, growth_is_geometric_and_bounded)
{
	const size_t max = 1 << 20;
	_cleanup_buf_ struct pdk_buf b = PDK_BUF_INIT(max);
	size_t grows = 0, cap = 0;

	for (size_t i = 0; i < max; i++) {
		cr_assert_eq(pdk_buf_add(&b, "x", 1), 0);
		if (b.cap != cap) {
			grows++;
			cap = b.cap;
		}
		cr_assert_leq(b.cap, max + 1);
	}
	cr_assert_leq(grows, 20, "%zu reallocations for 1 MiB", grows);
	cr_assert_eq(b.cap, max + 1, "the last growth stops at the cap");
	cr_assert_eq(pdk_buf_add(&b, "x", 1), -E2BIG);
}

Test(buf, take_hands_the_bytes_over)
{
	struct pdk_buf b = PDK_BUF_INIT(32);
	char *p;
	size_t len = 99;

	cr_assert_eq(pdk_buf_addstr(&b, "taken"), 0);
	p = pdk_buf_take(&b, &len);
	cr_assert_str_eq(p, "taken");
	cr_assert_eq(len, 5);
	cr_assert_null(b.p);
	cr_assert_eq(b.len, 0);
	cr_assert_eq(b.max, 32, "the cap stays for reuse");
	free(p);
	cr_assert_eq(pdk_buf_addstr(&b, "again"), 0);
	cr_assert_str_eq(pdk_buf_str(&b), "again");
	pdk_buf_release(&b);
}

Test(buf, take_of_an_empty_buffer_is_an_empty_string)
{
	struct pdk_buf b = PDK_BUF_INIT(32);
	char *p = pdk_buf_take(&b, NULL);

	cr_assert_not_null(p);
	cr_assert_str_eq(p, "");
	free(p);
}

Test(buf, reserve_then_write_in_place)
{
	_cleanup_buf_ struct pdk_buf b = PDK_BUF_INIT(16);

	cr_assert_eq(pdk_buf_addstr(&b, "ab"), 0);
	cr_assert_eq(pdk_buf_reserve(&b, 10), 0);
	cr_assert_geq(pdk_buf_room(&b), 10);
	memcpy(b.p + b.len, "0123456789", 10);
	pdk_buf_setlen(&b, b.len + 10);
	cr_assert_str_eq(pdk_buf_str(&b), "ab0123456789");
	cr_assert_eq(pdk_buf_reserve(&b, 5), -E2BIG, "12 + 5 is past 16");
	cr_assert_eq(pdk_buf_reserve(&b, 4), 0);
	pdk_buf_setlen(&b, 1);
	cr_assert_str_eq(pdk_buf_str(&b), "a", "setlen drops a tail");
}

Test(buf, reset_keeps_the_memory)
{
	_cleanup_buf_ struct pdk_buf b = PDK_BUF_INIT(1024);
	char *p;

	cr_assert_eq(pdk_buf_addstr(&b, "some text"), 0);
	p = b.p;
	pdk_buf_reset(&b);
	cr_assert_eq(b.len, 0);
	cr_assert_str_eq(pdk_buf_str(&b), "");
	cr_assert_eq(b.p, p);
	cr_assert_eq(pdk_buf_addstr(&b, "more"), 0);
	cr_assert_str_eq(pdk_buf_str(&b), "more");
}

Test(buf, setlen_past_the_room_is_a_bug, .signal = SIGABRT)
{
	struct pdk_buf b = PDK_BUF_INIT(16);

	cr_assert_eq(pdk_buf_addstr(&b, "ab"), 0);
	pdk_buf_setlen(&b, b.cap);
}
