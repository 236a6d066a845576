/* rsa.c - flux-rsa jobtap plugin: the RSA's only code inside job-manager.
 *
 * For each job that asks for RSA (attributes.system.rsa in its jobspec):
 *
 *  - at RUN it starts a prolog named "rsa" and tells the rsa service
 *    (rsa.start {id, userid, ranks}, rank 0) that the job is about to
 *    start on those broker ranks (the service may attach the RAM disk
 *    there first);
 *  - the service answers later with job-manager.rsa.answer {id, env}: the
 *    plugin posts "rsa-ready" (what the job shell puts in RSA_RAMDISK,
 *    RSA_DATA_IN, RSA_DATA_OUT) and finishes the prolog;
 *  - if the service cannot be reached within start-timeout, or does not
 *    answer within max-hold, the job starts on persistent storage
 *    ("rsa-ready" with fallback set) - a job is never stuck here;
 *  - job-manager.rsa.post {id, name, context} lets the service post
 *    "rsa-<name>" events (the RSA's timeline in the job's eventlog);
 *  - job-manager.rsa.offer {id, env}: a pending job's inputs are staged;
 *    if it reaches RUN while the offer stands, it starts at once with that
 *    env ("rsa-ready" with offered set): no prolog, no round trip;
 *  - job-manager.rsa.withdraw {id} -> {withdrawn}: the service wants the
 *    RAM disk back; true unless the job already started with the offer
 *    (the service must not take it then);
 *  - every job that mentions rsa (even a malformed request the service
 *    will call ineligible) is followed for the service: its submit (with
 *    its jobspec) and its priority, flux-restart, alloc, rsa-ready, start,
 *    finish, exception and clean events go to rsa.job-event {id, name,
 *    timestamp, context[, jobspec]}.  The service reads the job-manager
 *    journal only to catch up when it starts: a job without rsa costs it
 *    no message;
 *  - while jobs that mention rsa are active, a job reaching RUN moves the
 *    queue in front of them: rsa.queue-moved (no payload, no answer) tells
 *    the service, at most once per MOVED_DELAY, so that it looks at the
 *    queue again.
 *
 * Nothing here blocks: the start request is an RPC with a continuation.
 *
 * Plugin configuration (conf table in [job-manager] plugins):
 *   start-timeout  seconds to keep retrying an unreachable service (60)
 *   max-hold       seconds a job may wait for its answer (1200: longer
 *                  than the service's default late-timeout of 600)
 *   retry          seconds between attempts (1)
 */

#define _GNU_SOURCE /* asprintf */
#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <ctype.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <jansson.h>
#include <flux/core.h>
#include <flux/jobtap.h>

#define PROLOG_NAME "rsa"
#define AUX_NAME "rsa::job"
#define MOVED_DELAY 0.05 /* seconds: rsa.queue-moved hints are coalesced */

enum phase { IDLE, HOLDING, DONE };

struct rsa_conf {
    double start_timeout;
    double max_hold;
    double retry;
};

struct rsa_job {
    flux_plugin_t *p;
    flux_jobid_t id;
    char idf58[32];
    uint32_t userid;
    enum phase phase;
    bool eligible;              /* attrs is an object: the RSA manages it */
    json_t *attrs;              /* attributes.system.rsa */
    flux_future_t *f;           /* rsa.start in flight */
    flux_watcher_t *retry_w;    /* next rsa.start attempt */
    flux_watcher_t *hold_w;     /* max-hold watchdog */
    double t_first;             /* first attempt (for start-timeout) */
    char *ranks;                /* the job's broker ranks (an idset), from R */
    json_t *offer;              /* env to start with at once, or NULL */
    bool offer_used;            /* the job started with the offer */
    bool ended;                 /* clean: no longer counted in rsa_jobs */
    struct rsa_conf *conf;
};

static struct rsa_conf conf = { 60., 1200., 1. };

static int rsa_jobs;             /* active jobs that mention rsa */
static flux_watcher_t *moved_w;  /* an rsa.queue-moved hint is due */
static bool moved_armed;

static void rsa_job_destroy (void *arg)
{
    struct rsa_job *job = arg;
    if (job) {
        int saved_errno = errno;
        flux_future_destroy (job->f);
        flux_watcher_destroy (job->retry_w);
        flux_watcher_destroy (job->hold_w);
        json_decref (job->attrs);
        json_decref (job->offer);
        free (job->ranks);
        if (!job->ended)
            rsa_jobs--;
        free (job);
        errno = saved_errno;
    }
}

static struct rsa_job *rsa_job_create (flux_plugin_t *p,
                                       flux_jobid_t id,
                                       uint32_t userid,
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
    job->conf = &conf;
    rsa_jobs++;
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
static int release_job (struct rsa_job *job, json_t *env, int status)
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
        flux_log_error (flux_jobtap_get_flux (p),
                        "rsa: %s: posting rsa-ready",
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
    env = json_pack ("{s:n s:s? s:s? s:b s:b s:s}",
                     "ramdisk",
                     "data_in", attr_string (job, "data_in"),
                     "data_out", attr_string (job, "data_out"),
                     "staged_in", 0,
                     "out_on_ramdisk", 0,
                     "fallback", why);
    if (!env || release_job (job, env, 0) < 0)
        flux_log_error (h, "rsa: %s: fallback", job->idf58);
    json_decref (env);
}

static int send_start (struct rsa_job *job);

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
        >= job->conf->start_timeout) {
        fall_back (job, why);
        return;
    }
    flux_timer_watcher_reset (job->retry_w, job->conf->retry, 0.);
    flux_watcher_start (job->retry_w);
}

static int send_start (struct rsa_job *job)
{
    flux_t *h = flux_jobtap_get_flux (job->p);

    flux_future_destroy (job->f);
    if (!(job->f = flux_rpc_pack (h,
                                  "rsa.start",
                                  0,
                                  0,
                                  "{s:I s:i s:s}",
                                  "id", job->id,
                                  "userid", (int)job->userid,
                                  "ranks", job->ranks ? job->ranks : ""))
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

/* Tell the service of an event of job (no answer: if the service is
 * away, it catches up from the journal when it comes back).
 */
static void send_event (struct rsa_job *job,
                        const char *name,
                        double timestamp,
                        json_t *context,
                        json_t *jobspec)
{
    flux_t *h = flux_jobtap_get_flux (job->p);
    flux_future_t *f;

    if (!(f = flux_rpc_pack (h,
                             "rsa.job-event",
                             0,
                             FLUX_RPC_NORESPONSE,
                             "{s:I s:s s:f s:O? s:O?}",
                             "id", job->id,
                             "name", name,
                             "timestamp", timestamp,
                             "context", context,
                             "jobspec", jobspec)))
        flux_log_error (h, "rsa: %s: sending %s", job->idf58, name);
    flux_future_destroy (f);
}

/* job.new (also replayed for active jobs when the plugin loads) */
static int new_cb (flux_plugin_t *p, const char *topic,
                   flux_plugin_arg_t *args, void *arg)
{
    json_t *jobspec = NULL;
    json_t *attrs = NULL;
    json_t *context;
    flux_jobid_t id;
    uint32_t userid;
    double t_submit;
    struct rsa_job *job;

    if (flux_plugin_arg_unpack (args,
                                FLUX_PLUGIN_ARG_IN,
                                "{s:I s:i s:f s:o}",
                                "id", &id,
                                "userid", &userid,
                                "t_submit", &t_submit,
                                "jobspec", &jobspec) < 0)
        return flux_jobtap_error (p, args, "rsa: unpacking job.new: %s",
                                  flux_plugin_arg_strerror (args));
    attrs = json_object_get (json_object_get (json_object_get (jobspec,
                                                               "attributes"),
                                              "system"),
                             "rsa");
    if (!attrs)
        return 0; /* not an RSA job */
    if (!(job = rsa_job_create (p, id, userid, attrs))
        || flux_jobtap_job_aux_set (p,
                                    FLUX_JOBTAP_CURRENT_JOB,
                                    AUX_NAME,
                                    job,
                                    rsa_job_destroy) < 0) {
        rsa_job_destroy (job);
        return flux_jobtap_error (p, args, "rsa: cannot track job");
    }
    if ((context = json_pack ("{s:i}", "userid", (int)userid))) {
        send_event (job, "submit", t_submit, context, jobspec);
        json_decref (context);
    }
    return flux_jobtap_job_subscribe (p, FLUX_JOBTAP_CURRENT_JOB);
}

static void moved_cb (flux_reactor_t *r, flux_watcher_t *w, int revents,
                      void *arg)
{
    flux_plugin_t *p = arg;
    flux_t *h = flux_jobtap_get_flux (p);
    flux_future_t *f;

    moved_armed = false;
    if (!(f = flux_rpc (h, "rsa.queue-moved", NULL, 0, FLUX_RPC_NORESPONSE)))
        flux_log_error (h, "rsa: sending queue-moved");
    flux_future_destroy (f);
}

/* A job left the queue: hint the service soon, if an RSA job may care. */
static void queue_moved (void)
{
    if (rsa_jobs > 0 && moved_w && !moved_armed) {
        moved_armed = true;
        flux_timer_watcher_reset (moved_w, MOVED_DELAY, 0.);
        flux_watcher_start (moved_w);
    }
}

/* The broker ranks of R (R_lite's idsets joined with commas), or NULL. */
static char *R_ranks (json_t *R)
{
    json_t *R_lite = json_object_get (json_object_get (R, "execution"),
                                      "R_lite");
    json_t *entry;
    size_t i;
    char *ranks = NULL;

    json_array_foreach (R_lite, i, entry) {
        const char *idset = json_string_value (json_object_get (entry, "rank"));
        char *more;
        if (!idset)
            continue;
        if (asprintf (&more, "%s%s%s", ranks ? ranks : "", ranks ? "," : "",
                      idset) < 0) {
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
static int run_cb (flux_plugin_t *p, const char *topic,
                   flux_plugin_arg_t *args, void *arg)
{
    struct rsa_job *job = flux_jobtap_job_aux_get (p,
                                                   FLUX_JOBTAP_CURRENT_JOB,
                                                   AUX_NAME);
    flux_t *h = flux_jobtap_get_flux (p);
    flux_reactor_t *r = flux_get_reactor (h);

    queue_moved ();
    if (!job || !job->eligible || job->phase != IDLE)
        return 0;
    if (job->offer) {
        /* staged while pending: start now with what was offered */
        job->phase = DONE;
        job->offer_used = true;
        if (flux_jobtap_event_post_pack (p, job->id, "rsa-ready", "O",
                                         job->offer) < 0)
            flux_log_error (h, "rsa: %s: posting rsa-ready", job->idf58);
        return 0;
    }
    json_t *R = NULL;
    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN, "{s?o}", "R", &R) == 0)
        job->ranks = R_ranks (R);
    if (flux_jobtap_prolog_start (p, PROLOG_NAME) < 0)
        return flux_jobtap_error (p, args, "rsa: prolog_start failed");
    job->phase = HOLDING;
    job->t_first = flux_reactor_now (r);
    if (!(job->retry_w = flux_timer_watcher_create (r, 0., 0., retry_cb, job))
        || !(job->hold_w = flux_timer_watcher_create (r,
                                                      job->conf->max_hold,
                                                      0.,
                                                      hold_cb,
                                                      job))) {
        fall_back (job, "out of memory");
        return 0;
    }
    flux_watcher_start (job->hold_w);
    if (send_start (job) < 0)
        fall_back (job, "cannot send rsa.start");
    return 0;
}

static int forward_cb (flux_plugin_t *p, const char *topic,
                       flux_plugin_arg_t *args, void *arg);

/* A fatal exception while held: let the job go to cleanup. */
static int exception_cb (flux_plugin_t *p, const char *topic,
                         flux_plugin_arg_t *args, void *arg)
{
    struct rsa_job *job = flux_jobtap_job_aux_get (p,
                                                   FLUX_JOBTAP_CURRENT_JOB,
                                                   AUX_NAME);
    int severity = -1;

    if (flux_plugin_arg_unpack (args,
                                FLUX_PLUGIN_ARG_IN,
                                "{s:{s:{s:i}}}",
                                "entry", "context", "severity", &severity) < 0)
        return -1;
    if (job && job->phase == HOLDING && severity == 0)
        release_job (job, NULL, 1);
    return forward_cb (p, topic, args, arg);
}

/* job.event.<name> of a followed job: tell the service. */
static int forward_cb (flux_plugin_t *p, const char *topic,
                       flux_plugin_arg_t *args, void *arg)
{
    struct rsa_job *job = flux_jobtap_job_aux_get (p,
                                                   FLUX_JOBTAP_CURRENT_JOB,
                                                   AUX_NAME);
    const char *name;
    double timestamp;
    json_t *context = NULL;

    if (!job)
        return 0;
    if (flux_plugin_arg_unpack (args,
                                FLUX_PLUGIN_ARG_IN,
                                "{s:{s:s s:F s?o}}",
                                "entry",
                                  "name", &name,
                                  "timestamp", &timestamp,
                                  "context", &context) < 0)
        return flux_jobtap_error (p, args, "rsa: unpacking %s: %s", topic,
                                  flux_plugin_arg_strerror (args));
    send_event (job, name, timestamp, context, NULL);
    if (strcmp (name, "clean") == 0 && !job->ended) {
        job->ended = true; /* inactive jobs are kept until purged */
        rsa_jobs--;
    }
    return 0;
}

/* Answer a job-manager.rsa.<topic> request: success (rc 0), or errno
 * with errmsg (NULL: errno's own text).
 */
static void respond (flux_t *h, const flux_msg_t *msg, const char *topic,
                     int rc, const char *errmsg)
{
    if ((rc == 0 ? flux_respond (h, msg, NULL)
                 : flux_respond_error (h, msg, errno, errmsg)) < 0)
        flux_log_error (h, "rsa: %s: respond", topic);
}

/* The RSA state of active job id, or NULL with errno and errmsg set. */
static struct rsa_job *active_job (flux_plugin_t *p,
                                   flux_jobid_t id,
                                   const char **errmsg)
{
    struct rsa_job *job = flux_jobtap_job_aux_get (p, id, AUX_NAME);
    if (!job || !job->eligible) {
        *errmsg = "not an active RSA job";
        errno = ENOENT;
    }
    return job;
}

/* job-manager.rsa.answer {id, env}: the service's start decision */
static void answer_cb (flux_t *h, flux_msg_handler_t *mh,
                       const flux_msg_t *msg, void *arg)
{
    flux_plugin_t *p = arg;
    flux_jobid_t id;
    json_t *env = NULL;
    struct rsa_job *job;
    const char *errmsg = NULL;

    if (flux_request_unpack (msg, NULL, "{s:I s:o}", "id", &id, "env", &env) < 0)
        goto error;
    if (!(job = active_job (p, id, &errmsg)))
        goto error;
    if (job->phase != HOLDING) {
        errmsg = job->phase == DONE ? "job was already released"
                                    : "job is not starting yet";
        errno = EINVAL;
        goto error;
    }
    if (!json_is_object (env) && !json_is_null (env)) {
        errmsg = "env must be an object or null";
        errno = EPROTO;
        goto error;
    }
    if (release_job (job, env, 0) < 0)
        goto error;
    respond (h, msg, "answer", 0, NULL);
    return;
error:
    respond (h, msg, "answer", -1, errmsg);
}

/* job-manager.rsa.offer {id, env}: start with env at once, if it runs */
static void offer_cb (flux_t *h, flux_msg_handler_t *mh,
                      const flux_msg_t *msg, void *arg)
{
    flux_plugin_t *p = arg;
    flux_jobid_t id;
    json_t *env = NULL;
    struct rsa_job *job;
    const char *errmsg = NULL;

    if (flux_request_unpack (msg, NULL, "{s:I s:o}", "id", &id, "env", &env) < 0)
        goto error;
    if (!json_is_object (env)) {
        errmsg = "env must be an object";
        errno = EPROTO;
        goto error;
    }
    if (!(job = active_job (p, id, &errmsg)))
        goto error;
    if (job->phase != IDLE) {
        errmsg = "job is starting or started already";
        errno = EINVAL;
        goto error;
    }
    json_t *offer = json_deep_copy (env);
    if (!offer || json_object_set_new (offer, "offered", json_true ()) < 0) {
        json_decref (offer);
        errno = ENOMEM;
        goto error;
    }
    json_decref (job->offer);
    job->offer = offer;
    respond (h, msg, "offer", 0, NULL);
    return;
error:
    respond (h, msg, "offer", -1, errmsg);
}

/* job-manager.rsa.withdraw {id} -> {withdrawn}: false only when the job
 * already started with the offer.  A job that is gone took nothing.
 */
static void withdraw_cb (flux_t *h, flux_msg_handler_t *mh,
                         const flux_msg_t *msg, void *arg)
{
    flux_plugin_t *p = arg;
    flux_jobid_t id;
    struct rsa_job *job;
    bool withdrawn = true;

    if (flux_request_unpack (msg, NULL, "{s:I}", "id", &id) < 0) {
        respond (h, msg, "withdraw", -1, NULL);
        return;
    }
    if ((job = flux_jobtap_job_aux_get (p, id, AUX_NAME))) {
        if (job->offer_used)
            withdrawn = false;
        json_decref (job->offer);
        job->offer = NULL;
    }
    if (flux_respond_pack (h, msg, "{s:b}", "withdrawn", withdrawn) < 0)
        flux_log_error (h, "rsa: withdraw: respond");
}

static bool valid_event_name (const char *name)
{
    if (!name || !*name || strlen (name) > 32)
        return false;
    for (const char *c = name; *c; c++)
        if (!islower (*c) && *c != '-')
            return false;
    return true;
}

/* job-manager.rsa.post {id, name, context}: post "rsa-<name>" */
static void post_cb (flux_t *h, flux_msg_handler_t *mh,
                     const flux_msg_t *msg, void *arg)
{
    flux_plugin_t *p = arg;
    flux_jobid_t id;
    const char *name;
    json_t *context;
    char event[64];
    const char *errmsg = NULL;

    if (flux_request_unpack (msg, NULL, "{s:I s:s s:o}",
                             "id", &id,
                             "name", &name,
                             "context", &context) < 0)
        goto error;
    if (!valid_event_name (name) || !json_is_object (context)) {
        errmsg = "name must be lower-case letters and dashes, context an object";
        errno = EPROTO;
        goto error;
    }
    if (!active_job (p, id, &errmsg))
        goto error;
    snprintf (event, sizeof (event), "rsa-%s", name);
    if (flux_jobtap_event_post_pack (p, id, event, "O", context) < 0)
        goto error;
    respond (h, msg, "post", 0, NULL);
    return;
error:
    respond (h, msg, "post", -1, errmsg);
}

static int conf_update (flux_plugin_t *p)
{
    double start_timeout = conf.start_timeout;
    double max_hold = conf.max_hold;
    double retry = conf.retry;

    if (!flux_plugin_get_conf (p))
        return 0; /* no conf table: defaults */
    if (flux_plugin_conf_unpack (p,
                                 "{s?F s?F s?F}",
                                 "start-timeout", &start_timeout,
                                 "max-hold", &max_hold,
                                 "retry", &retry) < 0) {
        flux_log (flux_jobtap_get_flux (p), LOG_ERR,
                  "rsa: plugin conf: start-timeout, max-hold and retry "
                  "must be numbers of seconds");
        return -1;
    }
    if (start_timeout < 0 || max_hold <= 0 || retry <= 0) {
        flux_log (flux_jobtap_get_flux (p), LOG_ERR,
                  "rsa: plugin conf: start-timeout >= 0, max-hold > 0 and "
                  "retry > 0 seconds are required");
        return -1;
    }
    conf.start_timeout = start_timeout;
    conf.max_hold = max_hold;
    conf.retry = retry;
    return 0;
}

/* --- afterstaged: a job waits until another job's outputs are home ------
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
static int afterstaged_cb (flux_plugin_t *p, const char *topic,
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

static const struct flux_plugin_handler tab[] = {
    { "job.new", new_cb, NULL },
    { "job.state.run", run_cb, NULL },
    { "job.event.exception", exception_cb, NULL },
    { "job.event.priority", forward_cb, NULL },
    { "job.event.flux-restart", forward_cb, NULL },
    { "job.event.alloc", forward_cb, NULL },
    { "job.event.rsa-ready", forward_cb, NULL },
    { "job.event.start", forward_cb, NULL },
    { "job.event.finish", forward_cb, NULL },
    { "job.event.clean", forward_cb, NULL },
    { "job.dependency.afterstaged", afterstaged_cb, NULL },
    { 0 },
};

int flux_plugin_init (flux_plugin_t *p)
{
    flux_reactor_t *r = flux_get_reactor (flux_jobtap_get_flux (p));

    moved_armed = false;
    if (!(moved_w = flux_timer_watcher_create (r, MOVED_DELAY, 0.,
                                               moved_cb, p))
        || flux_plugin_aux_set (p, NULL, moved_w,
                                (flux_free_f) flux_watcher_destroy) < 0) {
        flux_watcher_destroy (moved_w);
        moved_w = NULL;
        return -1;
    }
    if (flux_plugin_set_name (p, "rsa") < 0
        || conf_update (p) < 0
        || flux_plugin_register (p, "rsa", tab) < 0
        || flux_jobtap_service_register (p, "answer", answer_cb, p) < 0
        || flux_jobtap_service_register (p, "post", post_cb, p) < 0
        || flux_jobtap_service_register (p, "offer", offer_cb, p) < 0
        || flux_jobtap_service_register (p, "withdraw", withdraw_cb, p) < 0)
        return -1;
    return 0;
}

/* vi: ts=4 sw=4 expandtab
 */
