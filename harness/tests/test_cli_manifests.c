/*
 * test_cli_manifests.c: the manifests that spread faultline's shards over
 * many machines (ci/shards/: a GitHub Actions workflow, a Kubernetes
 * Indexed Job) pass ci/check-manifests (yamllint, their schemas, shards
 * 1..N once, faultline options that exist), and a broken copy of each is
 * refused naming the file, the place and what is wrong.
 */
#include "harness/tests/fl_test.h"

#include <stdio.h>
#include <stdlib.h>

static void need_tools(void)
{
    if (fl_test_sh(NULL, "command -v yamllint >/dev/null && /usr/bin/python3 -c 'import "
                         "jsonschema, yaml' 2>/dev/null") != 0)
        FL_SKIP("yamllint or python3-jsonschema is not installed (ci/install-deps installs "
                "both)");
}

FL_TEST(cli_manifests, shipped_manifests_pass_the_check)
{
    need_tools();
    char *out;
    int rc = fl_test_sh(&out, "FAULTLINE=%s bash %s/ci/check-manifests 2>&1",
                        fl_test_bin("faultline"), fl_test_root());
    FL_ASSERT_MSG(rc == 0, "ci/check-manifests exited %d:\n%s", rc, out);
    FL_ASSERT_CONTAINS(out, "2 manifests: schema, shards and faultline options hold");
    free(out);
}

FL_TEST(cli_manifests, broken_manifests_are_refused_saying_where)
{
    need_tools();
    const char *t = fl_test_dir(), *r = fl_test_root();
    char *out;
    int rc = fl_test_sh(&out,
                        "sed 's/shard: \\[1, 2, 3, 4\\]/shard: [1, 2, 4]/; s/--junit/--junitt/' "
                        "%s/ci/shards/github-actions.yml > %s/w.yml && "
                        "sed 's/completions: 4/completions: 3/; s/image: faultline:latest/"
                        "imag: x/' %s/ci/shards/k8s-indexed-job.yaml > %s/j.yaml && "
                        "FAULTLINE=%s bash %s/ci/check-manifests %s/w.yml %s/j.yaml 2>&1",
                        r, t, r, t, fl_test_bin("faultline"), r, t, t);
    FL_ASSERT_EQ(rc, 1);
    FL_ASSERT_CONTAINS(out, "w.yml: jobs.shard.strategy.matrix.shard: [1, 2, 4] is not "
                            "1..SHARDS (4): a shard would run twice or not at all");
    FL_ASSERT_CONTAINS(out, "'faultline run' has no option --junitt");
    FL_ASSERT_CONTAINS(out, "j.yaml: document 1: spec.completions: 3 pods for SHARDS=4 shards");
    FL_ASSERT_CONTAINS(out, "j.yaml: document 1: spec.template.spec.containers.0: 'image' is a "
                            "required property");
    free(out);
}
