/* rsa.c - flux-rsa job shell plugin: give the job its RSA environment.
 *
 * For a job that asked for RSA (attributes.system.rsa), read the job's
 * "rsa-ready" event (posted by the rsa jobtap plugin before the job is
 * released to start) and set
 *
 *   RSA_RAMDISK   the job's RAM disk (unset when it has none)
 *   RSA_DATA_IN   staged inputs on the RAM disk, or rsa.data_in itself
 *   RSA_DATA_OUT  the output area on the RAM disk, or rsa.data_out itself
 *
 * job-manager may start the shell a moment before the event is committed,
 * so the eventlog is watched until "rsa-ready" (or the end of the rsa
 * prolog without one: the job is not managed) arrives.  If neither arrives
 * within the timeout (shell option rsa.timeout, default 30s; the jobtap
 * plugin is probably not loaded) the job gets its persistent directories
 * and a warning.
 */

#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <string.h>
#include <jansson.h>
#include <flux/core.h>

#define FLUX_SHELL_PLUGIN_NAME "rsa"
#include <flux/shell.h>

static const char *jstr (json_t *o, const char *key)
{
    json_t *v = json_object_get (o, key);
    return json_is_string (v) ? json_string_value (v) : NULL;
}

static int setenv_opt (flux_shell_t *shell, const char *name, const char *val)
{
    if (!val)
        return flux_shell_unsetenv (shell, name) < 0 && errno != ENOENT ? -1 : 0;
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

/* Watch the eventlog for rsa-ready.  Returns 1 and sets *envp when found,
 * 0 when the rsa prolog ended without one, -1 on timeout or error.
 */
static int wait_ready (flux_t *h, flux_jobid_t id, double timeout,
                       json_t **envp)
{
    flux_future_t *f;
    const char *entry;
    int rc = -1;

    if (!(f = flux_job_event_watch (h, id, "eventlog", 0)))
        return -1;
    while (flux_future_wait_for (f, timeout) == 0
           && flux_job_event_watch_get (f, &entry) == 0) {
        json_t *o = json_loads (entry, 0, NULL);
        const char *name = jstr (o, "name");
        json_t *context = json_object_get (o, "context");
        if (name && !strcmp (name, "rsa-ready")) {
            *envp = json_incref (context);
            json_decref (o);
            rc = 1;
            break;
        }
        if (name && !strcmp (name, "prolog-finish")
            && jstr (context, "description")
            && !strcmp (jstr (context, "description"), "rsa")) {
            json_decref (o);
            rc = 0;
            break;
        }
        json_decref (o);
        flux_future_reset (f);
    }
    flux_job_event_watch_cancel (f);
    flux_future_destroy (f);
    return rc;
}

static int init_cb (flux_plugin_t *p, const char *topic,
                    flux_plugin_arg_t *args, void *arg)
{
    flux_shell_t *shell = flux_plugin_get_shell (p);
    flux_jobid_t id;
    json_t *attrs = NULL;
    json_t *env = NULL;
    double timeout = 30.;
    int rc;

    if (flux_shell_info_unpack (shell,
                                "{s:I s:{s?{s?{s?o}}}}",
                                "jobid", &id,
                                "jobspec",
                                  "attributes",
                                    "system",
                                      "rsa", &attrs) < 0)
        return shell_log_errno ("reading jobspec");
    if (!json_is_object (attrs))
        return 0;
    if (flux_shell_getopt_unpack (shell, "rsa", "{s?F}", "timeout", &timeout) < 0)
        return shell_log_errno ("shell option rsa.timeout must be seconds");
    rc = wait_ready (flux_shell_get_flux (shell), id, timeout, &env);
    if (rc == 0)
        return 0; /* the RSA does not manage this job (e.g. too small) */
    if (rc < 0) {
        shell_warn ("no rsa-ready event within %gs (is the rsa jobtap plugin "
                    "loaded?): using rsa.data_in/rsa.data_out directly",
                    timeout);
        env = json_pack ("{s:s? s:s?}",
                         "data_in", jstr (attrs, "data_in"),
                         "data_out", jstr (attrs, "data_out"));
    }
    rc = apply_env (shell, env);
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
