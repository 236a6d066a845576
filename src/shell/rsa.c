/* rsa.c - flux-rsa job shell plugin: where the job finds its RAM disk.
 *
 * For a job that asked for RSA (attributes.system.rsa), read the job's
 * "rsa-ready" event (posted by the rsa jobtap plugin before the job is
 * released to start) and set
 *
 *   RSA_RAMDISK   the job's RAM disk (unset when it has none)
 *   RSA_DATA_IN   staged inputs on the RAM disk, or rsa.data_in itself
 *   RSA_DATA_OUT  the output area on the RAM disk, or rsa.data_out itself
 *
 * The event is read from job-manager's own copy of the job's eventlog
 * (job-manager.getattr), not from the KVS.  job-manager posts rsa-ready
 * before the rsa prolog finishes (or at RUN, for a job that takes a start
 * offer), and starts the shell at once, while those events are still on
 * their way into the KVS: the shell used to watch the KVS eventlog for
 * them, and now and then, on a loaded machine, that watch delivered
 * nothing more before its 30s ran out, so the job ran without its RAM
 * disk (t1090's scratch job wrote into the compute node's "/").  job-manager's copy holds every event
 * it acted on: one answer settles it.  "rsa-ready"; or the rsa prolog
 * finished without one (the RSA does not manage the job); or neither (the
 * rsa jobtap plugin did not hold the job: it is not loaded), which gives
 * the job its persistent directories and a warning.
 *
 * When rsa-ready says paths "bind" (rsa.paths, see core/paths.py), the
 * job's tasks on this node also see the RAM disk at the job's own paths:
 * before the first task starts, the shell moves itself (and so every task
 * it will start) into a mount namespace of its own (view.c):
 *
 *   - the staged inputs are bind-mounted over the job's rsa.data_in when
 *     they were staged in time, the output area over rsa.data_out;
 *   - when the inputs are released (the "rsa-input-released" event:
 *     rsa.delay elapsed, or flux rsa release-input), the shell unmounts
 *     data_in there: the path shows persistent storage again;
 *   - the namespace ends with the job's last process on the node.
 *
 * If the view cannot be made the job fails, saying why: a job that asked
 * for its paths must not write to persistent storage behind its RAM disk.
 */

#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <jansson.h>
#include <flux/core.h>

#define FLUX_SHELL_PLUGIN_NAME "rsa"
#include <flux/shell.h>

#include "view.h"

#define SWITCH_EVENT "rsa-input-released"

struct rsa_shell {
    flux_shell_t *shell;
    struct view *view;    /* the job's paths on this node, or NULL */
    flux_future_t *watch; /* the eventlog, for the switch */
};

static const char *jstr (json_t *o, const char *key)
{
    json_t *v = json_object_get (o, key);
    return json_is_string (v) ? json_string_value (v) : NULL;
}

static int setenv_opt (flux_shell_t *shell, const char *name, const char *val)
{
    if (!val)
        return flux_shell_unsetenv (shell, name) < 0 && errno != ENOENT ? -1
                                                                        : 0;
    return flux_shell_setenvf (shell, 1, name, "%s", val);
}

static int apply_env (flux_shell_t *shell, json_t *env)
{
    if (setenv_opt (shell, "RSA_RAMDISK", jstr (env, "ramdisk")) < 0
        || setenv_opt (shell, "RSA_DATA_IN", jstr (env, "data_in")) < 0
        || setenv_opt (shell, "RSA_DATA_OUT", jstr (env, "data_out")) < 0)
        return shell_log_errno ("setting RSA_* environment");
    if (jstr (env, "fallback"))
        shell_warn ("RSA staging not used: %s", jstr (env, "fallback"));
    return 0;
}

/* Find rsa-ready in job-manager's copy of the job's eventlog.  Returns 1
 * and sets *envp when found, 0 when the rsa prolog finished without one,
 * -1 when neither is there or on error (*why says which).
 */
static int read_ready (flux_t *h, flux_jobid_t id, json_t **envp, char *why,
                       size_t size)
{
    flux_future_t *f;
    json_t *eventlog = NULL;
    json_t *o;
    size_t i;
    int rc = -1;

    if (!(f = flux_rpc_pack (h, "job-manager.getattr", FLUX_NODEID_ANY, 0,
                             "{s:I s:[s]}", "id", id, "attrs", "eventlog"))
        || flux_rpc_get_unpack (f, "{s:o}", "eventlog", &eventlog) < 0) {
        snprintf (why, size, "reading the job's eventlog from job-manager: %s",
                  future_strerror (f, errno));
        flux_future_destroy (f);
        return -1;
    }
    snprintf (why, size,
              "no rsa-ready event in the job's eventlog "
              "(is the rsa jobtap plugin loaded?)");
    json_array_foreach (eventlog, i, o)
    {
        const char *name = jstr (o, "name");
        json_t *context = json_object_get (o, "context");
        if (name && !strcmp (name, "rsa-ready")) {
            *envp = json_incref (context);
            rc = 1;
            break;
        }
        if (name && !strcmp (name, "prolog-finish")
            && jstr (context, "description")
            && !strcmp (jstr (context, "description"), "rsa")) {
            rc = 0;
            break;
        }
    }
    flux_future_destroy (f);
    return rc;
}

/* An entry of the job's eventlog while tasks run: at the switch, data_in
 * shows persistent storage again.  The watch ends with the shell.
 */
static void switch_cb (flux_future_t *f, void *arg)
{
    struct rsa_shell *rs = arg;
    const char *entry;
    json_t *o;
    const char *name;

    if (flux_job_event_watch_get (f, &entry) < 0) {
        if (errno != ENODATA)
            shell_log_errno ("watching the eventlog for %s: data_in keeps "
                             "showing the RAM disk",
                             SWITCH_EVENT);
        return;
    }
    o = json_loads (entry, 0, NULL);
    name = jstr (o, "name");
    if (name && !strcmp (name, SWITCH_EVENT) && rs->view) {
        if (view_release_input (rs->view) < 0)
            shell_log_errno ("inputs released, but data_in still shows them");
    }
    json_decref (o);
    flux_future_reset (f);
}

static int watch_switch (struct rsa_shell *rs, flux_jobid_t id)
{
    flux_t *h = flux_shell_get_flux (rs->shell);

    if (!(rs->watch = flux_job_event_watch (h, id, "eventlog", 0))
        || flux_future_then (rs->watch, -1., switch_cb, rs) < 0)
        return shell_log_errno ("watching the eventlog for %s", SWITCH_EVENT);
    return 0;
}

static void rsa_shell_destroy (void *arg)
{
    struct rsa_shell *rs = arg;
    if (rs) {
        int saved_errno = errno;
        flux_future_destroy (rs->watch);
        view_destroy (rs->view);
        free (rs);
        errno = saved_errno;
    }
}

/* rsa-ready said "bind": show the RAM disk at the job's own paths. */
static int bind_paths (struct rsa_shell *rs, flux_jobid_t id, json_t *attrs,
                       json_t *env)
{
    struct view_paths p = {
        .jobid = id,
        .ramdisk = jstr (env, "ramdisk"),
        .in_area = json_is_true (json_object_get (env, "staged_in"))
                       ? jstr (env, "data_in")
                       : NULL,
        .out_area = json_is_true (json_object_get (env, "out_on_ramdisk"))
                        ? jstr (env, "data_out")
                        : NULL,
        .data_in = jstr (attrs, "data_in"),
        .data_out = jstr (attrs, "data_out"),
    };
    char why[512];
    struct timespec t0, t1;

    if (!p.in_area && !p.out_area)
        return 0; /* nothing of it is on the RAM disk */
    clock_gettime (CLOCK_MONOTONIC, &t0);
    rs->view = view_create (&p, why, sizeof (why));
    clock_gettime (CLOCK_MONOTONIC, &t1);
    if (!rs->view) {
        shell_die (1,
                   "rsa.paths=bind: cannot show the RAM disk at the job's "
                   "own paths: %s (or submit with --setattr=rsa.paths=env: "
                   "the job then finds its RAM disk through RSA_DATA_IN and "
                   "RSA_DATA_OUT only)",
                   why);
        return -1;
    }
    shell_debug (
        "%s%s%s shown from the RAM disk %s (a %s mount namespace "
        "of this job, made in %.3f ms)",
        p.in_area ? p.data_in : "", p.in_area && p.out_area ? " and " : "",
        p.out_area ? p.data_out : "", p.ramdisk, view_kind (rs->view),
        (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    if (view_warning (rs->view))
        shell_warn ("%s", view_warning (rs->view));
    if (view_top_note (rs->view))
        shell_debug ("%s shows its top directory with %s", p.data_in,
                     view_top_note (rs->view));
    if (p.in_area && watch_switch (rs, id) < 0)
        return -1;
    return 0;
}

static int init_cb (flux_plugin_t *p, const char *topic,
                    flux_plugin_arg_t *args, void *arg)
{
    flux_shell_t *shell = flux_plugin_get_shell (p);
    struct rsa_shell *rs;
    flux_jobid_t id;
    json_t *attrs = NULL;
    json_t *env = NULL;
    char why[256];
    int rc;

    if (flux_shell_info_unpack (shell, "{s:I s:{s?{s?{s?o}}}}", "jobid", &id,
                                "jobspec", "attributes", "system", "rsa",
                                &attrs)
        < 0)
        return shell_log_errno ("reading jobspec");
    if (!json_is_object (attrs))
        return 0;
    rc = read_ready (flux_shell_get_flux (shell), id, &env, why, sizeof (why));
    if (rc == 0)
        return 0; /* the RSA does not manage this job (e.g. too small) */
    if (rc < 0) {
        shell_warn ("%s: using rsa.data_in/rsa.data_out directly", why);
        env = json_pack ("{s:s? s:s?}", "data_in", jstr (attrs, "data_in"),
                         "data_out", jstr (attrs, "data_out"));
    }
    if (!(rs = calloc (1, sizeof (*rs)))
        || flux_shell_aux_set (shell, "rsa", rs, rsa_shell_destroy) < 0) {
        free (rs);
        json_decref (env);
        return shell_log_errno ("out of memory");
    }
    rs->shell = shell;
    rc = apply_env (shell, env);
    if (rc == 0 && jstr (env, "paths") && !strcmp (jstr (env, "paths"), "bind")
        && !jstr (env, "fallback"))
        rc = bind_paths (rs, id, attrs, env);
    json_decref (env);
    return rc;
}

int flux_plugin_init (flux_plugin_t *p)
{
    if (flux_plugin_set_name (p, FLUX_SHELL_PLUGIN_NAME) < 0
        || flux_plugin_add_handler (p, "shell.init", init_cb, NULL) < 0)
        return -1;
    return 0;
}

/* vi: ts=4 sw=4 expandtab
 */
