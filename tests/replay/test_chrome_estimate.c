/*
 * test_chrome_estimate: chrome_estimate_bytes (dpro-export --chrome's size estimate, which
 * decides whether the export asks for --iterations) against the size of the export
 * itself, measured and simulated (with the critical path overlaid), within TOLERANCE_PCT.
 * test_chrome_estimate.py runs it on jobs whose kernels show other names than they were
 * traced under (args.full_name) and on jobs where they do not.
 *
 * usage: test_chrome_estimate DIR
 */
#include <stdio.h>
#include <stdlib.h>

#include "replay/chrome.h"
#include "replay/replay.h"
#include "tests/unit/testutil.h"

#define TOLERANCE_PCT 5.0

/* Size in bytes of rp's Chrome export with co, or 0 when it failed. */
static size_t
export_bytes(const replay *rp, const chrome_options *co)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int rc = f ? chrome_export(rp, &rp->graph, &rp->sim, co, f) : -1;
    if (f)
        fclose(f);
    free(text);
    return rc == 0 ? len : 0;
}

/* Checks the estimate of one export of rp (what: its name in the line printed). */
static void
check_estimate(const replay *rp, const chrome_options *co, const char *what)
{
    size_t real = export_bytes(rp, co);
    uint64_t est = chrome_estimate_bytes(rp, &rp->graph, &rp->sim, co);
    double off = real ? 100.0 * ((double)est - (double)real) / (double)real : 100;
    printf("%s: estimate %llu bytes, export %zu bytes (%+.2f %%)\n", what, (unsigned long long)est,
           real, off);
    CHECK(real > 0);
    CHECK(off > -TOLERANCE_PCT && off < TOLERANCE_PCT);
}

int
main(int argc, char **argv)
{
    replay rp;
    replay_summary s;
    replay_options ro = {0};
    char err[DPRO_ERRBUF_SIZE];
    if (argc != 2) {
        fprintf(stderr, "usage: test_chrome_estimate DIR\n");
        return 2;
    }
    if (replay_open(argv[1], &ro, &rp, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", argv[1], err);
        return 1;
    }
    if (replay_simulate(&rp) != 0 || replay_summarize(&rp, &rp.graph, &rp.sim, &s) != 0) {
        fprintf(stderr, "%s: the replay failed\n", argv[1]);
        replay_close(&rp);
        return 1;
    }
    check_estimate(&rp, &(chrome_options){0, -1, -1, NULL}, "measured");
    check_estimate(&rp, &(chrome_options){1, -1, -1, &s}, "simulated, critical path");
    replay_summary_free(&s);
    replay_close(&rp);
    printf("%s: %d passed, %d failed\n", argv[1], tests_passed, tests_failed);
    return tests_failed ? 1 : 0;
}
