/* job.c - rsa jobtap plugin: RSA jobs, followed for the service and held
 * at start until the service answers (see rsa.c).
 */

#define _GNU_SOURCE /* asprintf */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "rsa.h"

static void rsa_job_destroy (void *arg)
{
    struct rsa_job *job = arg;
    if (job) {
        int saved_errno = errno;
        flux_future_destroy (job->f);
        flux_watcher_destroy (job->retry_w);
        flux_watcher_destroy (job->hold_w);
        json_decref (job->attrs);
        json_decref (job->submit);
        json_decref (job->offer);
        free (job->ranks);
        if (!job->ended)
            job->ctx->jobs--;
        free (job);
        errno = saved_errno;
    }
}

static struct rsa_job *rsa_job_create (flux_plugin_t *p, struct rsa_ctx *ctx,
                                       flux_jobid_t id, uint32_t userid,
                                       json_t *attrs)
{
    struct rsa_job *job;

    if (!(job = calloc (1, sizeof (*job))))
        return NULL;
    job->p = p;
    job->id = id;
    if (flux_job_id_encode (id, "f58", job->idf58, sizeof (job->idf58)) < 0)
        snprintf (job->idf58, sizeof (job->idf58), "%ju", (uintmax_t)id);
    job->userid = userid;
    job->attrs = json_incref (attrs);
    job->eligible = json_is_object (attrs);
    job->ctx = ctx;
    ctx->jobs++;
    return job;
}

static const char *attr_string (struct rsa_job *job, const char *key)
{
    json_t *o = json_object_get (job->attrs, key);
    return json_is_string (o) ? json_string_value (o) : NULL;
}

/* Post rsa-ready and let the job start.  env == NULL: the job is not
 * managed by the RSA (ineligible): nothing is posted.
 */
int rsa_release_job (struct rsa_job *job, json_t *env, int status)
{
    flux_plugin_t *p = job->p;

    if (job->phase != HOLDING) {
        errno = EINVAL;
        return -1;
    }
    job->phase = DONE;
    flux_watcher_stop (job->retry_w);
    flux_watcher_stop (job->hold_w);
    if (env && !json_is_null (env)
        && flux_jobtap_event_post_pack (p, job->id, "rsa-ready", "O", env) < 0)
        flux_log_error (flux_jobtap_get_flux (p), "rsa: %s: posting rsa-ready",
                        job->idf58);
    return flux_jobtap_prolog_finish (p, job->id, PROLOG_NAME, status);
}

/* The service could not be asked in time: start on persistent storage. */
static void fall_back (struct rsa_job *job, const char *why)
{
    flux_t *h = flux_jobtap_get_flux (job->p);
    json_t *env;

    flux_log (h, LOG_WARNING, "rsa: %s: starting on persistent storage: %s",
              job->idf58, why);
    env = json_pack ("{s:n s:s? s:s? s:b s:b s:s}", "ramdisk", "data_in",
                     attr_string (job, "data_in"), "data_out",
                     attr_string (job, "data_out"), "staged_in", 0,
                     "out_on_ramdisk", 0, "fallback", why);
    if (!env || rsa_release_job (job, env, 0) < 0)
        flux_log_error (h, "rsa: %s: fallback", job->idf58);
    json_decref (env);
}

static int send_start (struct rsa_job *job);
static void tell_submit (struct rsa_job *job);

static void start_continuation (flux_future_t *f, void *arg)
{
    struct rsa_job *job = arg;
    flux_t *h = flux_jobtap_get_flux (job->p);

    if (flux_rpc_get (f, NULL) == 0) {
        /* acknowledged: the answer comes via job-manager.rsa.answer */
        flux_future_destroy (f);
        job->f = NULL;
        return;
    }
    int err = errno;
    const char *errstr = future_strerror (f, err);
    char why[256];
    snprintf (why, sizeof (why), "rsa service: %s", errstr);
    flux_future_destroy (f);
    job->f = NULL;
    if (job->phase != HOLDING)
        return;
    if (err == EPERM || err == EINVAL || err == EPROTO) {
        fall_back (job, why);
        return;
    }
    if (flux_reactor_now (flux_get_reactor (h)) - job->t_first
        >= job->ctx->conf.start_timeout) {
        fall_back (job, why);
        return;
    }
    flux_timer_watcher_reset (job->retry_w, job->ctx->conf.retry, 0.);
    flux_watcher_start (job->retry_w);
}

static int send_start (struct rsa_job *job)
{
    flux_t *h = flux_jobtap_get_flux (job->p);

    rsa_tell (job->p, job->id);
    flux_future_destroy (job->f);
    if (!(job->f = flux_rpc_pack (h, "rsa.start", 0, 0, "{s:I s:i s:s}", "id",
                                  job->id, "userid", (int)job->userid, "ranks",
                                  job->ranks ? job->ranks : ""))
        || flux_future_then (job->f, -1., start_continuation, job) < 0) {
        flux_future_destroy (job->f);
        job->f = NULL;
        return -1;
    }
    return 0;
}

static void retry_cb (flux_reactor_t *r, flux_watcher_t *w, int revents,
                      void *arg)
{
    struct rsa_job *job = arg;
    if (job->phase == HOLDING && send_start (job) < 0)
        fall_back (job, "cannot send rsa.start");
}

static void hold_cb (flux_reactor_t *r, flux_watcher_t *w, int revents,
                     void *arg)
{
    struct rsa_job *job = arg;
    if (job->phase == HOLDING)
        fall_back (job, "no answer from the rsa service within max-hold");
}

/* An event of job for the service (sent with the others of this turn of
 * the reactor, see rsa.c).
 */
static json_t *job_event (struct rsa_job *job, const char *name,
                          double timestamp, json_t *context, json_t *jobspec)
{
    return json_pack ("{s:I s:s s:f s:O? s:O?}", "id", job->id, "name", name,
                      "timestamp", timestamp, "context", context, "jobspec",
                      jobspec);
}

/* The service hears of the job's submit first, once. */
static void tell_submit (struct rsa_job *job)
{
    if (job->submit) {
        rsa_event_queue (job->ctx, job->submit);
        job->submit = NULL;
    }
}

/* The service is about to be asked about job id: send what it should know
 * of it first.
 */
void rsa_tell (flux_plugin_t *p, flux_jobid_t id)
{
    struct rsa_job *job = flux_jobtap_job_aux_get (p, id, JOB_AUX);

    if (job)
        tell_submit (job);
    rsa_events_flush (rsa_ctx (p));
}

static void send_event (struct rsa_job *job, const char *name, double timestamp,
                        json_t *context)
{
    tell_submit (job);
    rsa_event_queue (job->ctx, job_event (job, name, timestamp, context, NULL));
}

/* job.new (also replayed for active jobs when the plugin loads, and for
 * those of a restarted instance): a new job's submit is sent at DEPEND,
 * with its INITIAL annotation; a replayed one's now.
 */
int rsa_new_cb (flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args,
                void *arg)
{
    json_t *jobspec = NULL;
    json_t *system;
    json_t *attrs;
    json_t *context;
    json_t *part;
    flux_jobid_t id;
    uint32_t userid;
    int state;
    double t_submit;
    struct rsa_job *job;

    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN,
                                "{s:I s:i s:i s:f s:o}", "id", &id, "userid",
                                &userid, "state", &state, "t_submit", &t_submit,
                                "jobspec", &jobspec)
        < 0)
        return flux_jobtap_error (p, args, "rsa: unpacking job.new: %s",
                                  flux_plugin_arg_strerror (args));
    system =
        json_object_get (json_object_get (jobspec, "attributes"), "system");
    if (!(attrs = json_object_get (system, "rsa")))
        return 0; /* not an RSA job */
    if (!(job = rsa_job_create (p, rsa_ctx (p), id, userid, attrs))
        || flux_jobtap_job_aux_set (p, FLUX_JOBTAP_CURRENT_JOB, JOB_AUX, job,
                                    rsa_job_destroy)
               < 0) {
        rsa_job_destroy (job);
        return flux_jobtap_error (p, args, "rsa: cannot track job");
    }
    /* what the service reads of the jobspec: the nodes, the request, the
     * jobs it waits for */
    context = json_pack ("{s:i}", "userid", (int)userid);
    part = json_pack ("{s:O? s:{s:{s:O s:O?}}}", "resources",
                      json_object_get (jobspec, "resources"), "attributes",
                      "system", "rsa", attrs, "dependencies",
                      json_object_get (system, "dependencies"));
    if (!context || !part
        || !(job->submit = job_event (job, "submit", t_submit, context, part)))
        flux_log (flux_jobtap_get_flux (p), LOG_ERR,
                  "rsa: %s: out of memory: the service is not told",
                  job->idf58);
    json_decref (context);
    json_decref (part);
    if (state != FLUX_JOB_STATE_NEW)
        tell_submit (job);
    return flux_jobtap_job_subscribe (p, FLUX_JOBTAP_CURRENT_JOB);
}

/* job.state.depend (every job): a new RSA job is annotated INITIAL, then
 * the service hears of it (so the service's own annotations come after).
 */
int rsa_depend_cb (flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args,
                   void *arg)
{
    struct rsa_job *job =
        flux_jobtap_job_aux_get (p, FLUX_JOBTAP_CURRENT_JOB, JOB_AUX);

    if (!job || !job->submit)
        return 0; /* not ours, or the service was told already */
    if (flux_plugin_arg_pack (args, FLUX_PLUGIN_ARG_OUT, "{s:{s:{s:{s:s}}}}",
                              "annotations", "user", "rsa", "state", "INITIAL")
        < 0)
        flux_log (flux_jobtap_get_flux (p), LOG_ERR, "rsa: %s: annotating: %s",
                  job->idf58, flux_plugin_arg_strerror (args));
    tell_submit (job);
    return rsa_inputs_wait (job, args);
}

/* The broker ranks of R (R_lite's idsets joined with commas), or NULL. */
static char *R_ranks (json_t *R)
{
    json_t *R_lite =
        json_object_get (json_object_get (R, "execution"), "R_lite");
    json_t *entry;
    size_t i;
    char *ranks = NULL;

    json_array_foreach (R_lite, i, entry)
    {
        const char *idset = json_string_value (json_object_get (entry, "rank"));
        char *more;
        if (!idset)
            continue;
        if (asprintf (&more, "%s%s%s", ranks ? ranks : "", ranks ? "," : "",
                      idset)
            < 0) {
            free (ranks);
            return NULL;
        }
        free (ranks);
        ranks = more;
    }
    return ranks;
}

/* job.state.run (every job): hold an RSA job's start until the service
 * answers */
int rsa_run_cb (flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args,
                void *arg)
{
    struct rsa_job *job =
        flux_jobtap_job_aux_get (p, FLUX_JOBTAP_CURRENT_JOB, JOB_AUX);
    flux_t *h = flux_jobtap_get_flux (p);
    flux_reactor_t *r = flux_get_reactor (h);

    rsa_queue_moved (rsa_ctx (p));
    if (!job || !job->eligible || job->phase != IDLE)
        return 0;
    if (job->offer) {
        /* staged while pending: start now with what was offered */
        job->phase = DONE;
        job->offer_used = true;
        if (flux_jobtap_event_post_pack (p, job->id, "rsa-ready", "O",
                                         job->offer)
            < 0)
            flux_log_error (h, "rsa: %s: posting rsa-ready", job->idf58);
        return 0;
    }
    json_t *R = NULL;
    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN, "{s?o}", "R", &R)
        == 0)
        job->ranks = R_ranks (R);
    if (flux_jobtap_prolog_start (p, PROLOG_NAME) < 0)
        return flux_jobtap_error (p, args, "rsa: prolog_start failed");
    job->phase = HOLDING;
    job->t_first = flux_reactor_now (r);
    if (!(job->retry_w = flux_timer_watcher_create (r, 0., 0., retry_cb, job))
        || !(job->hold_w = flux_timer_watcher_create (
                 r, job->ctx->conf.max_hold, 0., hold_cb, job))) {
        fall_back (job, "out of memory");
        return 0;
    }
    flux_watcher_start (job->hold_w);
    if (send_start (job) < 0)
        fall_back (job, "cannot send rsa.start");
    return 0;
}

/* A fatal exception while held: let the job go to cleanup. */
int rsa_exception_cb (flux_plugin_t *p, const char *topic,
                      flux_plugin_arg_t *args, void *arg)
{
    struct rsa_job *job =
        flux_jobtap_job_aux_get (p, FLUX_JOBTAP_CURRENT_JOB, JOB_AUX);
    int severity = -1;

    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN, "{s:{s:{s:i}}}",
                                "entry", "context", "severity", &severity)
        < 0)
        return -1;
    if (job && job->phase == HOLDING && severity == 0)
        rsa_release_job (job, NULL, 1);
    return rsa_forward_cb (p, topic, args, arg);
}

/* job.event.<name> of a followed job: tell the service. */
int rsa_forward_cb (flux_plugin_t *p, const char *topic,
                    flux_plugin_arg_t *args, void *arg)
{
    struct rsa_job *job =
        flux_jobtap_job_aux_get (p, FLUX_JOBTAP_CURRENT_JOB, JOB_AUX);
    const char *name;
    double timestamp;
    json_t *context = NULL;

    if (!job)
        return 0;
    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN, "{s:{s:s s:F s?o}}",
                                "entry", "name", &name, "timestamp", &timestamp,
                                "context", &context)
        < 0)
        return flux_jobtap_error (p, args, "rsa: unpacking %s: %s", topic,
                                  flux_plugin_arg_strerror (args));
    send_event (job, name, timestamp, context);
    if (strcmp (name, "clean") == 0 && !job->ended) {
        job->ended = true; /* inactive jobs are kept until purged */
        job->ctx->jobs--;
    }
    return 0;
}

/* vi: ts=4 sw=4 expandtab
 */
