/* afterstaged.c - rsa jobtap plugin: the afterstaged dependency scheme.
 *
 * flux submit --dependency=afterstaged:JOBID holds the new job in DEPEND
 * until the rsa service says JOBID's outputs are settled (rsa.afterstaged
 * {id} is answered then): {ok:true} when they are home (or the RSA had
 * nothing to stage out), and the dependency goes; {ok:false, why} when
 * they never will be (released from HELD, lost, the job never ran), and
 * the waiting job gets a fatal "dependency" exception naming JOBID.  While
 * the service is away (not loaded, reloading) the question is asked again
 * every AFTERSTAGED_RETRY seconds.
 */

#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "rsa.h"

/* one aux item per dependency: "rsa::afterstaged::<f58 of the job waited for>"
 * (one key for all would drop the first dependency's state with its
 * question in flight when a job names two) */
#define AFTERSTAGED_AUX "rsa::afterstaged::"
#define AFTERSTAGED_RETRY 2.0

struct afterstaged {
    flux_plugin_t *p;
    flux_jobid_t id;            /* the waiting job */
    flux_jobid_t after;         /* the job whose outputs it waits for */
    char after_f58[32];
    char description[64];       /* the dependency: "afterstaged=<after>" */
    flux_future_t *f;           /* rsa.afterstaged in flight */
    flux_watcher_t *retry_w;    /* ask again (the service was away) */
    bool warned;                /* said once that the service is away */
};

static void afterstaged_destroy (void *arg)
{
    struct afterstaged *as = arg;
    if (as) {
        int saved_errno = errno;
        flux_future_destroy (as->f);
        flux_watcher_destroy (as->retry_w);
        free (as);
        errno = saved_errno;
    }
}

static int afterstaged_ask (struct afterstaged *as);

/* The service's verdict on the outputs of as->after.  Removing the
 * dependency or raising the exception may end the waiting job at once,
 * and with it `as` (its aux): nothing of `as` is used after that.
 */
static void afterstaged_answered (flux_future_t *f, void *arg)
{
    struct afterstaged *as = arg;
    flux_plugin_t *p = as->p;
    flux_t *h = flux_jobtap_get_flux (p);
    flux_jobid_t id = as->id;
    char description[sizeof (as->description)];
    char after_f58[sizeof (as->after_f58)];
    int ok = 0;
    const char *why = NULL;

    if (flux_rpc_get_unpack (f, "{s:b s?s}", "ok", &ok, "why", &why) < 0) {
        int err = errno;
        if (err == ENOSYS || err == EHOSTUNREACH || err == EAGAIN) {
            if (!as->warned)
                flux_log (h, LOG_WARNING,
                          "rsa: afterstaged=%s: the rsa service is away; "
                          "asking again every %gs",
                          as->after_f58, AFTERSTAGED_RETRY);
            as->warned = true;
            flux_timer_watcher_reset (as->retry_w, AFTERSTAGED_RETRY, 0.);
            flux_watcher_start (as->retry_w);
            return;
        }
        ok = 0;
        why = future_strerror (f, err);
    }
    as->f = NULL; /* destroyed below, whatever happens to `as` */
    memcpy (description, as->description, sizeof (description));
    memcpy (after_f58, as->after_f58, sizeof (after_f58));
    if (ok) {
        if (flux_jobtap_dependency_remove (p, id, description) < 0
            && errno != ENOENT)
            flux_log_error (h, "rsa: removing dependency %s", description);
    }
    else if (flux_jobtap_raise_exception (p, id, "dependency", 0,
                                          "afterstaged: job %s: %s",
                                          after_f58,
                                          why ? why : "no answer") < 0)
        flux_log_error (h, "rsa: raising the afterstaged exception");
    flux_future_destroy (f);
}

static int afterstaged_ask (struct afterstaged *as)
{
    flux_t *h = flux_jobtap_get_flux (as->p);

    rsa_tell (as->p, as->after);
    flux_future_destroy (as->f);
    if (!(as->f = flux_rpc_pack (h, "rsa.afterstaged", 0, 0,
                                 "{s:I}", "id", as->after))
        || flux_future_then (as->f, -1., afterstaged_answered, as) < 0) {
        flux_future_destroy (as->f);
        as->f = NULL;
        return -1;
    }
    return 0;
}

static void afterstaged_retry_cb (flux_reactor_t *r, flux_watcher_t *w,
                                  int revents, void *arg)
{
    struct afterstaged *as = arg;
    if (afterstaged_ask (as) < 0)
        flux_log_error (flux_jobtap_get_flux (as->p),
                        "rsa: asking rsa.afterstaged");
}

/* Does the job's jobspec (from a lookup) ask for RSA at all? */
static bool mentions_rsa (flux_plugin_arg_t *args)
{
    json_t *jobspec = NULL;
    json_t *rsa = NULL;

    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN,
                                "{s:o}", "jobspec", &jobspec) < 0)
        return false;
    if (json_unpack (jobspec, "{s:{s:{s:o}}}",
                     "attributes", "system", "rsa", &rsa) < 0)
        return false;
    return json_is_object (rsa);
}

/* job.dependency.afterstaged: value is the jobid to wait for. */
int rsa_afterstaged_cb (flux_plugin_t *p, const char *topic,
                        flux_plugin_arg_t *args, void *arg)
{
    flux_t *h = flux_jobtap_get_flux (p);
    flux_reactor_t *r = flux_get_reactor (h);
    flux_plugin_arg_t *target = NULL;
    struct afterstaged *as = NULL;
    flux_jobid_t id, after;
    uint32_t userid, after_userid;
    const char *value;
    char key[sizeof (AFTERSTAGED_AUX) + 32];

    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN,
                                "{s:I s:i s:{s:s}}",
                                "id", &id,
                                "userid", &userid,
                                "dependency", "value", &value) < 0)
        return flux_jobtap_reject_job (p, args, "afterstaged: %s",
                                       flux_plugin_arg_strerror (args));
    if (flux_job_id_parse (value, &after) < 0
        || after == FLUX_JOBTAP_CURRENT_JOB)
        return flux_jobtap_reject_job (p, args,
                                       "afterstaged: \"%s\" is not a jobid "
                                       "(use --dependency=afterstaged:JOBID)",
                                       value);
    if (!(target = flux_jobtap_job_lookup (p, after))
        || flux_plugin_arg_unpack (target, FLUX_PLUGIN_ARG_IN,
                                   "{s:i}", "userid", &after_userid) < 0) {
        flux_plugin_arg_destroy (target);
        return flux_jobtap_reject_job (p, args,
                                       "afterstaged: job %s: no such job",
                                       value);
    }
    if (after_userid != userid) {
        flux_plugin_arg_destroy (target);
        return flux_jobtap_reject_job (p, args,
                                       "afterstaged: job %s: Permission "
                                       "denied (it is not your job)",
                                       value);
    }
    if (!mentions_rsa (target)) {
        flux_plugin_arg_destroy (target);
        return flux_jobtap_reject_job (p, args,
                                       "afterstaged: job %s stages nothing "
                                       "(it has no rsa attributes): use "
                                       "--dependency=afterany:%s",
                                       value, value);
    }
    flux_plugin_arg_destroy (target);
    if (!(as = calloc (1, sizeof (*as))))
        return flux_jobtap_reject_job (p, args, "afterstaged: out of memory");
    as->p = p;
    as->id = id;
    as->after = after;
    if (flux_job_id_encode (after, "f58", as->after_f58,
                            sizeof (as->after_f58)) < 0)
        snprintf (as->after_f58, sizeof (as->after_f58), "%ju",
                  (uintmax_t)after);
    snprintf (as->description, sizeof (as->description), "afterstaged=%s",
              as->after_f58);
    snprintf (key, sizeof (key), "%s%s", AFTERSTAGED_AUX, as->after_f58);
    if (!(as->retry_w = flux_timer_watcher_create (r, 0., 0.,
                                                   afterstaged_retry_cb, as))
        || flux_jobtap_job_aux_set (p, FLUX_JOBTAP_CURRENT_JOB,
                                    key, as,
                                    afterstaged_destroy) < 0) {
        afterstaged_destroy (as);
        return flux_jobtap_reject_job (p, args, "afterstaged: out of memory");
    }
    /* EEXIST: added before a job-manager restart or plugin reload */
    if (flux_jobtap_dependency_add (p, id, as->description) < 0
        && errno != EEXIST)
        return flux_jobtap_reject_job (p, args,
                                       "afterstaged: cannot add the "
                                       "dependency on %s", value);
    if (afterstaged_ask (as) < 0)
        return flux_jobtap_reject_job (p, args,
                                       "afterstaged: cannot ask the rsa "
                                       "service about job %s", value);
    return 0;
}

/* vi: ts=4 sw=4 expandtab
 */
