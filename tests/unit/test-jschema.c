/*
 * test-jschema.c - JSON Schema for schemas nobody here wrote
 * (src/mcp/jschema.h): Debian's json-schema-test-suite (draft 7's files
 * for the keywords 2020-12 kept as they were), 2020-12's own keywords, the
 * keywords refused with the pointer to them, and the bounds.
 */
#include "common.h"
#include "jschema.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <string.h>

#ifndef PDK_JSON_SCHEMA_SUITE
#define PDK_JSON_SCHEMA_SUITE "/usr/share/json-schema-test-suite/tests/draft7"
#endif

/*
 * The suite's draft 7 files, each run or skipped with the reason
 * (docs/json-schema.md says the same). A file the package adds later fails
 * the test until it is listed here.
 */
static const struct {
	const char *file;
	const char *skip; /* NULL: run */
} suite_files[] = {
	{"additionalProperties.json", NULL},
	{"allOf.json", NULL},
	{"anyOf.json", NULL},
	{"boolean_schema.json", NULL},
	{"const.json", NULL},
	{"contains.json", NULL},
	{"default.json", NULL},
	{"enum.json", NULL},
	{"exclusiveMaximum.json", NULL},
	{"exclusiveMinimum.json", NULL},
	{"if-then-else.json", NULL},
	{"items.json", NULL}, /* but its array form (below) */
	{"maxItems.json", NULL},
	{"maxLength.json", NULL},
	{"maxProperties.json", NULL},
	{"maximum.json", NULL},
	{"minItems.json", NULL},
	{"minLength.json", NULL},
	{"minProperties.json", NULL},
	{"minimum.json", NULL},
	{"multipleOf.json", NULL},
	{"not.json", NULL},
	{"oneOf.json", NULL},
	{"pattern.json", NULL},
	{"patternProperties.json", NULL},
	{"properties.json", NULL},
	{"propertyNames.json", NULL},
	{"ref.json", NULL}, /* but the groups below */
	{"required.json", NULL},
	{"type.json", NULL},
	{"uniqueItems.json", NULL},
	{"additionalItems.json",
	 "draft 7's keyword; 2020-12 has items after prefixItems (refused)"},
	{"dependencies.json", "draft 7's keyword; 2020-12 has dependentRequired and "
			      "dependentSchemas (refused)"},
	{"definitions.json", "validates against the draft 7 meta-schema: a remote $ref (refused)"},
	{"refRemote.json", "remote $ref (refused: no network, no file)"},
	{"optional", "format assertions, bignum, ECMA-262 regex details, content, and "
		     "zeroTerminatedFloats (2020-12 takes 1.0 as an integer)"},
};

/* Groups of a file that is run, skipped with the reason; refused ones must be refused. */
static const struct {
	const char *file;
	const char *group;
	bool refused; /* compile must refuse the schema */
	const char *why;
} skipped_groups[] = {
	{"items.json", "an array of schemas for items", true, "items as an array (draft 7)"},
	{"items.json", "items with boolean schemas", true, "items as an array (draft 7)"},
	{"ref.json", "relative pointer ref to array", true, "items as an array (draft 7)"},
	{"ref.json", "ref overrides any sibling keywords", false,
	 "2020-12 applies a $ref's siblings too"},
	{"ref.json", "remote ref, containing refs itself", true, "remote $ref"},
	{"ref.json", "Recursive references between schemas", true, "nested $id, relative $ref"},
};

/* The cases the suite gives today: fewer means a file or a group was lost. */
#define SUITE_CASES_MIN 355

static const char *skip_reason(const char *file, const char *group, bool *refused)
{
	size_t i;

	for (i = 0; i < PDK_ARRAY_SIZE(skipped_groups); i++) {
		if (strcmp(file, skipped_groups[i].file) == 0 &&
		    strcmp(group, skipped_groups[i].group) == 0) {
			*refused = skipped_groups[i].refused;
			return skipped_groups[i].why;
		}
	}
	return NULL;
}

/* One group: its schema compiled, each test's instance given the suite's answer. */
static size_t run_group(const char *file, json_t *g)
{
	const char *desc = json_string_value(json_object_get(g, "description"));
	json_t *tests = json_object_get(g, "tests"), *t;
	struct pdk_jschema *s = NULL;
	struct pdk_error *err = NULL;
	bool refused = false;
	const char *why = skip_reason(file, desc, &refused);
	size_t i, n = 0;
	int r;

	r = pdk_jschema_compile(json_object_get(g, "schema"), &s, &err);
	if (why != NULL) {
		cr_expect(!refused || r == -EINVAL, "%s: '%s' should be refused (%s)", file, desc,
			  why);
		pdk_jschema_free(s);
		pdk_error_free(&err);
		return 0;
	}
	cr_assert_eq(r, 0, "%s: '%s': compile: %s (%s)", file, desc, err ? err->msg : "",
		     err && err->field ? err->field : "");
	json_array_foreach(tests, i, t)
	{
		bool valid = json_is_true(json_object_get(t, "valid"));
		r = pdk_jschema_validate(s, json_object_get(t, "data"), &err);
		cr_expect_eq(r == 0, valid, "%s: '%s' / '%s': wanted %s, got %s%s", file, desc,
			     json_string_value(json_object_get(t, "description")),
			     valid ? "valid" : "invalid",
			     r == 0 ? "valid" : "invalid: ", err ? err->msg : "");
		cr_expect(r == 0 || (err != NULL && err->msg[0] != '\0' && err->field != NULL));
		pdk_error_free(&err);
		n++;
	}
	pdk_jschema_free(s);
	return n;
}

static size_t run_file(const char *file)
{
	char path[512];
	json_error_t je;
	json_t *doc, *g;
	size_t i, n = 0;

	(void)snprintf(path, sizeof(path), "%s/%s", PDK_JSON_SCHEMA_SUITE, file);
	doc = json_load_file(path, 0, &je);
	cr_assert_not_null(doc, "%s: %s (install Debian's json-schema-test-suite: make test-setup)",
			   path, je.text);
	json_array_foreach(doc, i, g) n += run_group(file, g);
	json_decref(doc);
	return n;
}

static bool listed(const char *name)
{
	size_t i;

	for (i = 0; i < PDK_ARRAY_SIZE(suite_files); i++)
		if (strcmp(name, suite_files[i].file) == 0)
			return true;
	return false;
}

/* The package's directory holds what this test lists and nothing else. */
Test(suite, every_file_listed)
{
	DIR *d = opendir(PDK_JSON_SCHEMA_SUITE);
	struct dirent *de;

	cr_assert_not_null(d,
			   "%s: missing (install Debian's json-schema-test-suite: "
			   "make test-setup)",
			   PDK_JSON_SCHEMA_SUITE);
	while ((de = readdir(d)) != NULL)
		if (de->d_name[0] != '.')
			cr_expect(listed(de->d_name), "%s: not listed as run or skipped",
				  de->d_name);
	closedir(d);
}

Test(suite, draft7_answers)
{
	size_t i, n = 0;

	for (i = 0; i < PDK_ARRAY_SIZE(suite_files); i++)
		if (suite_files[i].skip == NULL)
			n += run_file(suite_files[i].file);
	cr_log_info("json-schema-test-suite draft7: %zu cases run", n);
	cr_assert_geq(n, SUITE_CASES_MIN, "%zu cases run, wanted at least %d", n, SUITE_CASES_MIN);
}

/* ---- 2020-12's own keywords ---- */

struct vcase {
	const char *schema;
	const char *instance;
	bool valid;
	const char *field; /* when invalid: the instance pointer */
	const char *msg;   /* when invalid: a part of the message */
};

static void run_case(const struct vcase *c)
{
	json_error_t je;
	json_t *schema = json_loads(c->schema, JSON_DECODE_ANY, &je);
	json_t *inst = json_loads(c->instance, JSON_DECODE_ANY, &je);
	struct pdk_jschema *s = NULL;
	struct pdk_error *err = NULL;
	int r;

	cr_assert_not_null(schema, "%s", c->schema);
	cr_assert_not_null(inst, "%s", c->instance);
	r = pdk_jschema_compile(schema, &s, &err);
	cr_assert_eq(r, 0, "%s: %s", c->schema, err ? err->msg : "");
	r = pdk_jschema_validate(s, inst, &err);
	cr_expect_eq(r == 0, c->valid, "%s against %s: %s", c->instance, c->schema,
		     err ? err->msg : "valid");
	if (!c->valid && r < 0) {
		cr_expect_str_eq(err->field, c->field, "%s against %s: field", c->instance,
				 c->schema);
		cr_expect(strstr(err->msg, c->msg) != NULL, "'%s' does not say '%s'", err->msg,
			  c->msg);
	}
	pdk_error_free(&err);
	pdk_jschema_free(s);
	json_decref(schema);
	json_decref(inst);
}

static void run_cases(const struct vcase *c, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		run_case(&c[i]);
}

Test(keywords, prefix_items_then_items)
{
	static const char *sch = "{\"prefixItems\":[{\"type\":\"string\"},{\"type\":\"integer\"}],"
				 "\"items\":{\"type\":\"boolean\"}}";
	const struct vcase cases[] = {
		{sch, "[\"a\", 1, true, false]", true, NULL, NULL},
		{sch, "[\"a\"]", true, NULL, NULL},
		{sch, "[]", true, NULL, NULL},
		{sch, "[1]", false, "/0", "type: wanted string, got integer"},
		{sch, "[\"a\", 1.0, true]", true, NULL, NULL},
		{sch, "[\"a\", 1, 3]", false, "/2", "type: wanted boolean"},
		{"{\"prefixItems\":[{}],\"items\":false}", "[1, 2]", false, "/1", "false"},
		{"{\"prefixItems\":[{}],\"items\":false}", "[1]", true, NULL, NULL},
	};
	run_cases(cases, PDK_ARRAY_SIZE(cases));
}

Test(keywords, defs_and_refs)
{
	static const char *sch =
		"{\"$defs\":{\"pos\":{\"type\":\"integer\",\"minimum\":1},"
		"\"a~b/c\":{\"type\":\"string\"},\"p%q\":{\"const\":3}},"
		"\"definitions\":{\"old\":{\"$ref\":\"#/$defs/pos\"}},"
		"\"properties\":{\"n\":{\"$ref\":\"#/$defs/pos\"},\"o\":{\"$ref\":\"#/definitions/old\"},"
		"\"s\":{\"$ref\":\"#/$defs/a~0b~1c\"},\"q\":{\"$ref\":\"#/$defs/p%25q\"},"
		"\"t\":{\"$ref\":\"#/properties/n\"},\"u\":{\"$ref\":\"#/$defs/pos\",\"maximum\":5},"
		"\"tree\":{\"type\":\"object\",\"properties\":{\"kid\":{\"$ref\":\"#/properties/tree\"}}}}}";
	const struct vcase cases[] = {
		{sch, "{\"n\":1,\"o\":2,\"s\":\"x\",\"q\":3,\"t\":4,\"u\":5}", true, NULL, NULL},
		{sch, "{\"n\":0}", false, "/n", "minimum: at least 1, got 0"},
		{sch, "{\"o\":0}", false, "/o", "minimum"},
		{sch, "{\"s\":1}", false, "/s", "type: wanted string"},
		{sch, "{\"q\":4}", false, "/q", "const"},
		{sch, "{\"t\":-1}", false, "/t", "minimum"},
		/* 2020-12: a $ref's siblings apply too. */
		{sch, "{\"u\":6}", false, "/u", "maximum: at most 5, got 6"},
		{sch, "{\"tree\":{\"kid\":{\"kid\":{}}}}", true, NULL, NULL},
		{sch, "{\"tree\":{\"kid\":{\"kid\":3}}}", false, "/tree/kid/kid", "type"},
		{"{\"$ref\":\"#/$defs/b\",\"$defs\":{\"b\":false}}", "1", false, "", "false"},
	};
	run_cases(cases, PDK_ARRAY_SIZE(cases));
}

Test(keywords, dependent_required_and_schemas)
{
	static const char *sch = "{\"dependentRequired\":{\"card\":[\"cvc\",\"expiry\"]},"
				 "\"dependentSchemas\":{\"name\":{\"required\":[\"age\"],"
				 "\"properties\":{\"age\":{\"type\":\"integer\"}}}}}";
	const struct vcase cases[] = {
		{sch, "{}", true, NULL, NULL},
		{sch, "{\"card\":1,\"cvc\":2,\"expiry\":3}", true, NULL, NULL},
		{sch, "{\"card\":1,\"cvc\":2}", false, "",
		 "dependentRequired: missing property 'expiry', required with card"},
		{sch, "{\"name\":\"a\",\"age\":3}", true, NULL, NULL},
		{sch, "{\"name\":\"a\"}", false, "", "required: missing property 'age'"},
		{sch, "{\"name\":\"a\",\"age\":\"3\"}", false, "/age", "type"},
		{sch, "[1]", true, NULL, NULL},
	};
	run_cases(cases, PDK_ARRAY_SIZE(cases));
}

Test(keywords, if_then_else)
{
	static const char *sch =
		"{\"if\":{\"properties\":{\"kind\":{\"const\":\"file\"}},\"required\":[\"kind\"]},"
		"\"then\":{\"required\":[\"path\"]},\"else\":{\"required\":[\"url\"]}}";
	const struct vcase cases[] = {
		{sch, "{\"kind\":\"file\",\"path\":\"/a\"}", true, NULL, NULL},
		{sch, "{\"kind\":\"file\"}", false, "", "required: missing property 'path'"},
		{sch, "{\"kind\":\"web\",\"url\":\"u\"}", true, NULL, NULL},
		{sch, "{\"kind\":\"web\",\"path\":\"/a\"}", false, "", "missing property 'url'"},
		{"{\"then\":false}", "1", true, NULL, NULL},
	};
	run_cases(cases, PDK_ARRAY_SIZE(cases));
}

Test(keywords, contains_min_max)
{
	static const char *sch =
		"{\"contains\":{\"type\":\"integer\"},\"minContains\":2,\"maxContains\":3}";
	const struct vcase cases[] = {
		{sch, "[1, \"a\", 2]", true, NULL, NULL},
		{sch, "[1, \"a\"]", false, "", "minContains: at least 2 items"},
		{sch, "[1, 2, 3, 4]", false, "",
		 "maxContains: at most 3 items matching its schema, got 4"},
		{"{\"contains\":{\"const\":1},\"minContains\":0}", "[]", true, NULL, NULL},
		{"{\"contains\":{\"const\":1}}", "[2]", false, "", "contains: at least 1"},
	};
	run_cases(cases, PDK_ARRAY_SIZE(cases));
}

/* Lengths count code points, not bytes: "é" is 1, an emoji (4 bytes in UTF-8) is 1. */
Test(keywords, code_point_lengths)
{
	const struct vcase cases[] = {
		{"{\"maxLength\":1}", "\"\\u00e9\"", true, NULL, NULL},
		{"{\"maxLength\":1}", "\"\\ud83d\\ude00\"", true, NULL, NULL},
		{"{\"minLength\":2}", "\"\\ud83d\\ude00\"", false, "",
		 "minLength: at least 2 characters, got 1"},
		{"{\"maxLength\":2}", "\"h\\u00e9\\u00e9\"", false, "",
		 "maxLength: at most 2 characters, got 3"},
		{"{\"pattern\":\"^.$\"}", "\"\\u00e9\"", true, NULL, NULL},
		{"{\"pattern\":\"^\\\\d+$\"}", "\"12\\n\"", false, "", "pattern"},
		{"{\"pattern\":\"b\"}", "\"abc\"", true, NULL, NULL},
		{"{\"pattern\":\"\\\\u0041\"}", "\"A\"", true, NULL, NULL},
	};
	run_cases(cases, PDK_ARRAY_SIZE(cases));
}

Test(keywords, numbers_and_equality)
{
	const struct vcase cases[] = {
		{"{\"type\":\"integer\"}", "1.0", true, NULL, NULL},
		{"{\"type\":\"integer\"}", "1.5", false, "", "type: wanted integer, got number"},
		{"{\"const\":1}", "1.0", true, NULL, NULL},
		{"{\"enum\":[[1,{\"a\":2}]]}", "[1.0,{\"a\":2.0}]", true, NULL, NULL},
		{"{\"uniqueItems\":true}", "[1, 1.0]", false, "", "uniqueItems: items 0 and 1"},
		{"{\"uniqueItems\":true}", "[{\"a\":1,\"b\":2},{\"b\":2,\"a\":1.0}]", false, "",
		 "uniqueItems"},
		{"{\"uniqueItems\":true}", "[1, \"1\", true, null, [1], {\"1\":1}]", true, NULL,
		 NULL},
		{"{\"multipleOf\":0.1}", "0.3", true, NULL, NULL},
		{"{\"multipleOf\":0.1}", "0.35", false, "", "multipleOf: wanted a multiple of 0.1"},
		{"{\"exclusiveMaximum\":3}", "3", false, "",
		 "exclusiveMaximum: less than 3, got 3"},
	};
	run_cases(cases, PDK_ARRAY_SIZE(cases));
}

/* A failure names the keyword, the instance pointer, and for anyOf/oneOf each alternative. */
Test(messages, any_of_one_of_say_which_failed)
{
	const struct vcase cases[] = {
		{"{\"properties\":{\"a/b\":{\"anyOf\":[{\"type\":\"string\"},{\"minimum\":3}]}}}",
		 "{\"a/b\":1}", false, "/a~1b",
		 "anyOf: matched none of its 2 schemas ([0] at '/a~1b': type: wanted string, got "
		 "integer; [1] at '/a~1b': minimum: at least 3, got 1)"},
		{"{\"oneOf\":[{\"type\":\"integer\"},{\"minimum\":0}]}", "2", false, "",
		 "oneOf: matched more than one of its 2 schemas, wanted exactly one"},
		{"{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}", "\"x\"", false, "",
		 "oneOf: matched none of its 2 schemas ([0] at '': type: wanted integer"},
		{"{\"items\":{\"additionalProperties\":false,\"properties\":{\"a\":{}}}}",
		 "[{\"a\":1},{\"b\":2}]", false, "/1/b",
		 "additionalProperties: property 'b' is not allowed"},
		{"{\"not\":{\"type\":\"string\"}}", "\"s\"", false, "", "not:"},
		{"{\"propertyNames\":{\"maxLength\":2}}", "{\"abc\":1}", false, "/abc",
		 "propertyNames: the name 'abc'"},
	};
	run_cases(cases, PDK_ARRAY_SIZE(cases));
}

/* Annotations and keywords nobody defined are accepted and change nothing. */
Test(keywords, annotations_ignored)
{
	static const char *sch =
		"{\"$schema\":\"https://json-schema.org/draft/2020-12/schema\",\"$id\":\"urn:x\","
		"\"title\":\"t\",\"description\":\"d\",\"default\":1,\"examples\":[1],"
		"\"$comment\":\"c\",\"deprecated\":true,\"readOnly\":true,\"writeOnly\":false,"
		"\"format\":\"email\",\"contentMediaType\":\"text/plain\",\"contentEncoding\":\"base64\","
		"\"contentSchema\":{\"type\":\"object\"},\"x-vendor\":{\"unevaluatedProperties\":1}}";
	const struct vcase cases[] = {
		{sch, "\"not an email\"", true, NULL, NULL},
		{sch, "3", true, NULL, NULL},
		{"true", "{}", true, NULL, NULL},
		{"false", "{}", false, "", "false"},
	};
	run_cases(cases, PDK_ARRAY_SIZE(cases));
}

/* ---- refusals: each names the keyword's pointer in the schema ---- */

struct refusal {
	const char *schema;
	const char *field;
	const char *msg;
};

static const struct refusal refusals[] = {
	{"{\"properties\":{\"a\":{\"unevaluatedProperties\":false}}}",
	 "/properties/a/unevaluatedProperties", "unevaluatedProperties: not supported"},
	{"{\"unevaluatedItems\":false}", "/unevaluatedItems", "unevaluatedItems"},
	{"{\"$defs\":{\"x\":{\"$dynamicRef\":\"#a\"}}}", "/$defs/x/$dynamicRef", "$dynamicRef"},
	{"{\"$dynamicAnchor\":\"a\"}", "/$dynamicAnchor", "$dynamicAnchor"},
	{"{\"items\":{\"$anchor\":\"a\"}}", "/items/$anchor", "$anchor"},
	{"{\"$recursiveRef\":\"#\"}", "/$recursiveRef", "$recursiveRef"},
	{"{\"$recursiveAnchor\":true}", "/$recursiveAnchor", "$recursiveAnchor"},
	{"{\"$vocabulary\":{}}", "/$vocabulary", "$vocabulary"},
	{"{\"additionalItems\":false}", "/additionalItems", "additionalItems"},
	{"{\"dependencies\":{}}", "/dependencies", "dependencies"},
	{"{\"items\":[{}]}", "/items", "items: wanted a schema"},
	{"{\"$ref\":\"http://example.com/s.json\"}", "/$ref",
	 "$ref: 'http://example.com/s.json' is not local"},
	{"{\"$ref\":\"other.json#/a\"}", "/$ref", "is not local"},
	{"{\"$ref\":\"#/$defs/none\"}", "/$ref", "resolves to nothing"},
	{"{\"$ref\":\"#/$defs/a%zz\"}", "/$ref", "resolves to nothing"},
	{"{\"$ref\":\"#/allOf\",\"allOf\":[{}]}", "/$ref",
	 "$ref: '#/allOf' names an array, not a schema"},
	{"{\"$ref\":\"#foo\"}", "/$ref", "resolves to nothing"},
	{"{\"properties\":{\"a\":{\"$id\":\"urn:b\"}}}", "/properties/a/$id",
	 "$id: only at the root"},
	{"{\"minLength\":-1}", "/minLength", "minLength: wanted a non-negative integer"},
	{"{\"maxItems\":1.5}", "/maxItems", "maxItems"},
	{"{\"required\":\"a\"}", "/required", "required: wanted an array of property names"},
	{"{\"required\":[1]}", "/required", "required"},
	{"{\"properties\":{\"a\":{\"pattern\":\"(\"}}}", "/properties/a/pattern",
	 "pattern: the regular expression does not compile"},
	{"{\"patternProperties\":{\"[\":{}}}", "/patternProperties/[", "patternProperties"},
	{"{\"type\":\"int\"}", "/type", "type: wanted a type name"},
	{"{\"multipleOf\":0}", "/multipleOf", "multipleOf"},
	{"{\"minimum\":\"1\"}", "/minimum", "minimum: wanted a number"},
	{"{\"allOf\":[]}", "/allOf", "allOf: wanted a non-empty array"},
	{"{\"properties\":{\"a\":3}}", "/properties/a", "schema: wanted an object or a boolean"},
	{"{\"dependentRequired\":{\"a\":[1]}}", "/dependentRequired/a", "dependentRequired"},
	{"{\"uniqueItems\":1}", "/uniqueItems", "uniqueItems: wanted a boolean"},
	{"3", "", "schema: wanted an object or a boolean"},
};

Test(refused, each_names_its_pointer)
{
	size_t i;

	for (i = 0; i < PDK_ARRAY_SIZE(refusals); i++) {
		json_error_t je;
		json_t *schema = json_loads(refusals[i].schema, JSON_DECODE_ANY, &je);
		struct pdk_jschema *s = NULL;
		struct pdk_error *err = NULL;

		cr_assert_not_null(schema, "%s", refusals[i].schema);
		cr_expect_eq(pdk_jschema_compile(schema, &s, &err), -EINVAL, "%s: not refused",
			     refusals[i].schema);
		cr_expect_null(s);
		if (err != NULL) {
			cr_expect_str_eq(err->field, refusals[i].field, "%s", refusals[i].schema);
			cr_expect(strstr(err->msg, refusals[i].msg) != NULL,
				  "'%s' does not say '%s'", err->msg, refusals[i].msg);
		}
		pdk_error_free(&err);
		json_decref(schema);
	}
}

/* ---- bounds ---- */

static int compile_text(const char *text, struct pdk_jschema **s, struct pdk_error **err)
{
	json_error_t je;
	json_t *schema = json_loads(text, JSON_DECODE_ANY, &je);
	int r;

	cr_assert_not_null(schema, "%s: %s", text, je.text);
	r = pdk_jschema_compile(schema, s, err);
	json_decref(schema);
	return r;
}

/* A $ref cycle that never moves into the instance is refused; one that does is fine. */
Test(bounds, ref_cycles)
{
	static const char *inplace[] = {
		"{\"$ref\":\"#\"}",
		"{\"allOf\":[{\"$ref\":\"#/$defs/a\"}],\"$defs\":{\"a\":{\"anyOf\":[{\"$ref\":\"#\"}]}}}",
		"{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"not\":{\"$ref\":\"#/$defs/a\"}}}}",
		"{\"if\":{\"$ref\":\"#\"}}",
	};
	struct pdk_jschema *s = NULL;
	struct pdk_error *err = NULL;
	json_t *inst;
	size_t i;

	for (i = 0; i < PDK_ARRAY_SIZE(inplace); i++) {
		cr_expect_eq(compile_text(inplace[i], &s, &err), -EINVAL, "%s", inplace[i]);
		cr_expect(err && strstr(err->msg, "$ref: a cycle") != NULL, "%s: %s", inplace[i],
			  err ? err->msg : "");
		pdk_error_free(&err);
	}
	cr_assert_eq(compile_text("{\"items\":{\"$ref\":\"#\"}}", &s, &err), 0);
	inst = json_loads("[[[[]]]]", 0, NULL);
	cr_expect_eq(pdk_jschema_validate(s, inst, &err), 0);
	json_decref(inst);
	pdk_jschema_free(s);
}

/* A schema of 2^60 paths through refs (each level refers twice to the next) ends. */
Test(bounds, exponential_refs_end)
{
	char *text = NULL, *p;
	size_t len = 0, i;
	FILE *f = open_memstream(&text, &len);
	struct pdk_jschema *s = NULL;
	struct pdk_error *err = NULL;
	json_t *inst = json_integer(1);

	cr_assert_not_null(f);
	fprintf(f, "{\"$ref\":\"#/$defs/d0\",\"$defs\":{");
	for (i = 0; i < 60; i++)
		fprintf(f,
			"\"d%zu\":{\"allOf\":[{\"$ref\":\"#/$defs/d%zu\"},{\"$ref\":\"#/$defs/d%zu\"}]},",
			i, i + 1, i + 1);
	fprintf(f, "\"d60\":{\"type\":\"integer\"}}}");
	cr_assert_eq(fclose(f), 0);
	p = text;
	cr_assert_eq(compile_text(p, &s, &err), 0, "%s", err ? err->msg : "");
	cr_expect_eq(pdk_jschema_validate(s, inst, &err), -EINVAL);
	cr_expect(err && strstr(err->msg, "budget") != NULL, "%s", err ? err->msg : "");
	pdk_error_free(&err);
	json_decref(inst);
	pdk_jschema_free(s);
	free(text);
}

/* A bound reached inside `not` is a failure, never a success `not` inverts. */
Test(bounds, gave_up_is_not_inverted)
{
	struct pdk_jschema *s = NULL;
	struct pdk_error *err = NULL;
	json_t *inst = json_string("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!");

	cr_assert_eq(compile_text("{\"not\":{\"pattern\":\"^(a+)+$\"}}", &s, &err), 0);
	cr_expect_eq(pdk_jschema_validate(s, inst, &err), -EINVAL);
	cr_expect(err && strstr(err->msg, "pattern: the regular expression gave up") != NULL, "%s",
		  err ? err->msg : "");
	pdk_error_free(&err);
	json_decref(inst);
	pdk_jschema_free(s);
}

static json_t *nested_array(int depth)
{
	json_t *x = json_array();
	int i;

	for (i = 0; i < depth; i++) {
		json_t *up = json_array();
		json_array_append_new(up, x);
		x = up;
	}
	return x;
}

/* An instance deeper than PDK_JSCHEMA_DEPTH_MAX fails, even against `true`. */
Test(bounds, deep_instance)
{
	struct pdk_jschema *s = NULL;
	struct pdk_error *err = NULL;
	json_t *ok = nested_array(PDK_JSCHEMA_DEPTH_MAX);
	json_t *deep = nested_array(PDK_JSCHEMA_DEPTH_MAX + 1);

	cr_assert_eq(compile_text("true", &s, &err), 0);
	cr_expect_eq(pdk_jschema_validate(s, ok, &err), 0);
	cr_expect_eq(pdk_jschema_validate(s, deep, &err), -EINVAL);
	cr_expect(err && strstr(err->msg, "instance: nested deeper than 64") != NULL);
	pdk_error_free(&err);
	pdk_jschema_free(s);
	json_decref(ok);
	json_decref(deep);
}

/* A schema nested deeper than PDK_JSCHEMA_DEPTH_MAX schemas is refused, naming where. */
Test(bounds, deep_schema)
{
	struct pdk_jschema *s = NULL;
	struct pdk_error *err = NULL;
	json_t *schema = json_object();
	int i;

	for (i = 0; i < PDK_JSCHEMA_DEPTH_MAX + 1; i++) {
		json_t *up = json_object();
		json_object_set_new(up, "not", schema);
		schema = up;
	}
	cr_expect_eq(pdk_jschema_compile(schema, &s, &err), -EINVAL);
	cr_expect(err && strstr(err->msg, "nested deeper than 64 schemas") != NULL, "%s",
		  err ? err->msg : "");
	cr_expect(err && err->field && strncmp(err->field, "/not/not/not", 12) == 0);
	pdk_error_free(&err);
	json_decref(schema);
}

/* The schema is copied: changing the caller's afterwards changes nothing. */
Test(bounds, schema_copied)
{
	json_t *schema = json_pack("{s:s}", "type", "string");
	struct pdk_jschema *s = NULL;
	struct pdk_error *err = NULL;
	json_t *inst = json_integer(1);

	cr_assert_eq(pdk_jschema_compile(schema, &s, &err), 0);
	json_object_set_new(schema, "type", json_string("integer"));
	json_decref(schema);
	cr_expect_eq(pdk_jschema_validate(s, inst, &err), -EINVAL);
	pdk_error_free(&err);
	json_decref(inst);
	pdk_jschema_free(s);
}

Test(keywords, list_exported)
{
	size_t n = 0;

	while (pdk_jschema_keywords[n] != NULL)
		n++;
	cr_expect_eq(n, 38);
	cr_expect_str_eq(pdk_jschema_keywords[0], "type");
}
