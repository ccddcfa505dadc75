/* test_json.c: the JSON writer's escaping, nesting and number output. */
#include "json_writer.h"
#include "testutil.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Runs fn on a memory stream and returns what it wrote (caller frees). */
static char *
capture(void (*fn)(json_writer *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    json_writer w;
    json_init(&w, f, 0);
    fn(&w);
    fclose(f);
    return buf;
}

static void
write_nested(json_writer *w)
{
    json_begin_object(w);
    json_kv_string(w, "name", "void f<std::pair<int, \"q\">>(a\\b)\n\t\x01");
    json_key(w, "list");
    json_begin_array(w);
    json_int(w, -5);
    json_uint(w, 18446744073709551615ull);
    json_double(w, 1.5);
    json_double(w, NAN);
    json_bool(w, 1);
    json_null(w);
    json_begin_object(w);
    json_end_object(w);
    json_begin_array(w);
    json_end_array(w);
    json_end_array(w);
    json_kv_string(w, "bad utf8", "a\xff\xc3(b\xe2\x82\xac");
    json_end_object(w);
}

int
main(void)
{
    char *s = capture(write_nested);
    const char *want = "{\"name\":\"void f<std::pair<int, \\\"q\\\">>(a\\\\b)\\n\\t\\u0001\","
                       "\"list\":[-5,18446744073709551615,1.5,null,true,null,{},[]],"
                       "\"bad utf8\":\"a\\ufffd\\ufffd(b\xe2\x82\xac\"}";
    CHECK(!strcmp(s, want));
    if (strcmp(s, want))
        fprintf(stderr, "got:  %s\nwant: %s\n", s, want);
    free(s);
    return tests_done();
}
