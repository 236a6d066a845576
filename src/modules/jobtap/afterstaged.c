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
 *
 * The same wait, unasked, for a job that would otherwise read a partial
 * input: an RSA job B whose rsa.data_in is (inside, or holds) the
 * rsa.data_out of an RSA job A waits for A's outputs to be home when B
 * depends on A (after{ok,any,finish,notok}:A) or A's stage-out may still
 * be writing there (the service's writers table) when B is submitted.  If
 * they never come home, B gets the exception, naming its data_in.
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
    flux_jobid_t id;    /* the waiting job */
    flux_jobid_t after; /* the job whose outputs it waits for */
    char after_f58[32];
    char description[64];    /* the dependency: "afterstaged=<after>" */
    char *data_in;           /* implicit: the waiting job's data_in */
    flux_future_t *f;        /* rsa.afterstaged in flight */
    flux_watcher_t *retry_w; /* ask again (the service was away) */
    bool warned;             /* said once that the service is away */
};

static void afterstaged_destroy (void *arg)
{
    struct afterstaged *as = arg;
    if (as) {
        int saved_errno = errno;
        flux_future_destroy (as->f);
        flux_watcher_destroy (as->retry_w);
        free (as->data_in);
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
    char data_in[256] = "";
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
    if (as->data_in)
        snprintf (data_in, sizeof (data_in), "%s", as->data_in);
    if (ok) {
        if (flux_jobtap_dependency_remove (p, id, description) < 0
            && errno != ENOENT)
            flux_log_error (h, "rsa: removing dependency %s", description);
    }
    else if (*data_in ? flux_jobtap_raise_exception (
                            p, id, "dependency", 0,
                            "rsa: data_in %s is the data_out "
                            "of job %s: %s: not starting on "
                            "what part of them reached it",
                            data_in, after_f58, why ? why : "no answer")
                            < 0
                      : flux_jobtap_raise_exception (
                            p, id, "dependency", 0, "afterstaged: job %s: %s",
                            after_f58, why ? why : "no answer")
                            < 0)
        flux_log_error (h, "rsa: raising the afterstaged exception");
    flux_future_destroy (f);
}

static int afterstaged_ask (struct afterstaged *as)
{
    flux_t *h = flux_jobtap_get_flux (as->p);

    rsa_tell (as->p, as->after);
    flux_future_destroy (as->f);
    if (!(as->f = flux_rpc_pack (h, "rsa.afterstaged", 0, 0, "{s:I s:I}", "id",
                                 as->after, "for", as->id))
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

    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN, "{s:o}", "jobspec",
                                &jobspec)
        < 0)
        return false;
    if (json_unpack (jobspec, "{s:{s:{s:o}}}", "attributes", "system", "rsa",
                     &rsa)
        < 0)
        return false;
    return json_is_object (rsa);
}

/* Make the current job (id) wait for the outputs of job `after`;
 * data_in: the waiting job's data_in when nobody asked for the wait.  A
 * second wait for the same job is the first one (EEXIST: added before a
 * job-manager restart or plugin reload).
 */
static int afterstaged_add (flux_plugin_t *p, flux_jobid_t id,
                            flux_jobid_t after, const char *data_in)
{
    flux_reactor_t *r = flux_get_reactor (flux_jobtap_get_flux (p));
    struct afterstaged *as;
    char key[sizeof (AFTERSTAGED_AUX) + 32];

    if (!(as = calloc (1, sizeof (*as))))
        return -1;
    as->p = p;
    as->id = id;
    as->after = after;
    if (flux_job_id_encode (after, "f58", as->after_f58, sizeof (as->after_f58))
        < 0)
        snprintf (as->after_f58, sizeof (as->after_f58), "%ju",
                  (uintmax_t)after);
    snprintf (as->description, sizeof (as->description), "afterstaged=%s",
              as->after_f58);
    snprintf (key, sizeof (key), "%s%s", AFTERSTAGED_AUX, as->after_f58);
    if (flux_jobtap_job_aux_get (p, FLUX_JOBTAP_CURRENT_JOB, key)) {
        afterstaged_destroy (as); /* asked for already */
        return 0;
    }
    if ((data_in && !(as->data_in = strdup (data_in)))
        || !(as->retry_w = flux_timer_watcher_create (r, 0., 0.,
                                                      afterstaged_retry_cb, as))
        || flux_jobtap_job_aux_set (p, FLUX_JOBTAP_CURRENT_JOB, key, as,
                                    afterstaged_destroy)
               < 0) {
        afterstaged_destroy (as);
        return -1;
    }
    if (flux_jobtap_dependency_add (p, id, as->description) < 0
        && errno != EEXIST)
        return -1;
    return afterstaged_ask (as);
}

/* path, without empty and "." components or a trailing slash, into buf */
static const char *normalised (const char *path, char *buf, size_t size)
{
    size_t n = 0;
    const char *c = path;

    while (*c) {
        while (*c == '/')
            c++;
        const char *end = strchr (c, '/');
        if (!end)
            end = c + strlen (c);
        size_t len = end - c;
        if (len > 0 && !(len == 1 && *c == '.')) {
            if (n + 1 + len + 1 > size)
                return NULL;
            buf[n++] = '/';
            memcpy (buf + n, c, len);
            n += len;
        }
        c = end;
    }
    if (n == 0)
        buf[n++] = '/';
    buf[n] = '\0';
    return buf;
}

/* Is one of the paths a or b the other, or inside it? */
static bool overlap (const char *a, const char *b)
{
    char na[4096], nb[4096];
    if (!a || !b || !normalised (a, na, sizeof (na))
        || !normalised (b, nb, sizeof (nb)))
        return false;
    size_t la = strlen (na), lb = strlen (nb);
    const char *shorter = la <= lb ? na : nb;
    const char *longer = la <= lb ? nb : na;
    size_t ls = strlen (shorter);
    return strncmp (shorter, longer, ls) == 0
           && (longer[ls] == '\0' || longer[ls] == '/' || ls == 1);
}

/* rsa.data_out of job `after`, an RSA job, or NULL (copied into buf). */
static const char *data_out_of (flux_plugin_t *p, flux_jobid_t after, char *buf,
                                size_t size)
{
    flux_plugin_arg_t *target = flux_jobtap_job_lookup (p, after);
    json_t *jobspec = NULL;
    const char *data_out = NULL;

    if (target
        && flux_plugin_arg_unpack (target, FLUX_PLUGIN_ARG_IN, "{s:o}",
                                   "jobspec", &jobspec)
               == 0
        && json_unpack (jobspec, "{s:{s:{s:{s:s}}}}", "attributes", "system",
                        "rsa", "data_out", &data_out)
               == 0)
        snprintf (buf, size, "%s", data_out);
    flux_plugin_arg_destroy (target);
    return data_out ? buf : NULL;
}

/* The dependency schemes under which a job may read another's outputs:
 * every "after" scheme that waits for the other job to end */
static bool waits_for_end (const char *scheme)
{
    const char *schemes[] = {"afterok", "afterany", "afterfinish", "afternotok",
                             NULL};
    for (int i = 0; schemes[i]; i++)
        if (strcmp (scheme, schemes[i]) == 0)
            return true;
    return false;
}

int rsa_inputs_wait (struct rsa_job *job, flux_plugin_arg_t *args)
{
    flux_plugin_t *p = job->p;
    flux_t *h = flux_jobtap_get_flux (p);
    const char *data_in = NULL;
    json_t *jobspec = NULL;
    json_t *deps = NULL;
    json_t *dep;
    size_t i;
    const char *key;
    json_t *path;
    char out[4096];

    if (!job->eligible
        || json_unpack (job->attrs, "{s:s}", "data_in", &data_in) < 0)
        return 0;
    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN, "{s:o}", "jobspec",
                                &jobspec)
        == 0)
        (void)json_unpack (jobspec, "{s:{s:{s:o}}}", "attributes", "system",
                           "dependencies", &deps);
    json_array_foreach (deps, i, dep)
    {
        const char *scheme, *value;
        flux_jobid_t after;
        if (json_unpack (dep, "{s:s s:s}", "scheme", &scheme, "value", &value)
                < 0
            || !waits_for_end (scheme) || flux_job_id_parse (value, &after) < 0
            || !overlap (data_in, data_out_of (p, after, out, sizeof (out))))
            continue;
        if (afterstaged_add (p, job->id, after, data_in) < 0)
            flux_log_error (h, "rsa: %s: waiting for the outputs of %s",
                            job->idf58, value);
    }
    json_object_foreach (job->ctx->writers, key, path)
    {
        flux_jobid_t after;
        if (flux_job_id_parse (key, &after) < 0 || after == job->id
            || !overlap (data_in, json_string_value (path)))
            continue;
        if (afterstaged_add (p, job->id, after, data_in) < 0)
            flux_log_error (h, "rsa: %s: waiting for the outputs of %s",
                            job->idf58, key);
    }
    return 0;
}

/* job.dependency.afterstaged: value is the jobid to wait for. */
int rsa_afterstaged_cb (flux_plugin_t *p, const char *topic,
                        flux_plugin_arg_t *args, void *arg)
{
    flux_plugin_arg_t *target = NULL;
    flux_jobid_t id, after;
    uint32_t userid, after_userid;
    const char *value;

    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN, "{s:I s:i s:{s:s}}",
                                "id", &id, "userid", &userid, "dependency",
                                "value", &value)
        < 0)
        return flux_jobtap_reject_job (p, args, "afterstaged: %s",
                                       flux_plugin_arg_strerror (args));
    if (flux_job_id_parse (value, &after) < 0
        || after == FLUX_JOBTAP_CURRENT_JOB)
        return flux_jobtap_reject_job (p, args,
                                       "afterstaged: \"%s\" is not a jobid "
                                       "(use --dependency=afterstaged:JOBID)",
                                       value);
    if (!(target = flux_jobtap_job_lookup (p, after))
        || flux_plugin_arg_unpack (target, FLUX_PLUGIN_ARG_IN, "{s:i}",
                                   "userid", &after_userid)
               < 0) {
        flux_plugin_arg_destroy (target);
        return flux_jobtap_reject_job (
            p, args, "afterstaged: job %s: no such job", value);
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
    if (afterstaged_add (p, id, after, NULL) < 0)
        return flux_jobtap_reject_job (p, args,
                                       "afterstaged: cannot wait for job %s: "
                                       "%s",
                                       value, strerror (errno));
    return 0;
}

/* vi: ts=4 sw=4 expandtab
 */
