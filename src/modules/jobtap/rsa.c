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
 *    the part of its jobspec the service reads: resources and
 *    attributes.system.rsa) and its priority, flux-restart, alloc,
 *    rsa-ready, start, finish, exception and clean events go to
 *    rsa.job-event {events: [{id, name, timestamp, context[, jobspec]},
 *    ...]}: the events of one turn of job-manager's reactor travel
 *    together (at most EVENTS_MAX a message), and before any other message
 *    to the service, so the service sees everything in order.  The service
 *    reads the job-manager journal only to catch up when it starts: a job
 *    without rsa costs it no message;
 *  - a new job that mentions rsa shows user.rsa.state INITIAL in its
 *    annotations (`flux jobs -o {user.rsa.state}`) from DEPEND on, before
 *    the service hears of it (its submit is sent then): the service
 *    annotates every later state;
 *  - while jobs that mention rsa are active, a job reaching RUN moves the
 *    queue in front of them: rsa.queue-moved (no payload, no answer) tells
 *    the service, at most once per MOVED_DELAY, so that it looks at the
 *    queue again.
 *
 * Configuration, read when the plugin loads and again on every
 * `flux config reload` (conf.update):
 *   start-timeout  seconds to keep retrying an unreachable service (60)
 *   max-hold       seconds a job may wait for its answer (1200: longer
 *                  than the service's default late-timeout of 600)
 *   retry          seconds between attempts (1)
 * from the plugin's conf table in [job-manager] plugins (fixed once
 * loaded), then from the [rsa] table: its start-timeout and max-hold
 * (numbers of seconds or durations such as "5m") win, and a reload that
 * changes them applies to the jobs that start after it.
 */

#if HAVE_CONFIG_H
#include "config.h"
#endif
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "rsa.h"

#define MOVED_DELAY 0.05 /* seconds: rsa.queue-moved hints are coalesced */
#define EVENTS_MAX 64    /* job events in one rsa.job-event message */

static const struct rsa_conf defaults = {60., 1200., 1.};

struct rsa_ctx *rsa_ctx (flux_plugin_t *p)
{
    return flux_plugin_aux_get (p, CTX_AUX);
}

static void moved_cb (flux_reactor_t *r, flux_watcher_t *w, int revents,
                      void *arg)
{
    struct rsa_ctx *ctx = arg;
    flux_t *h = flux_jobtap_get_flux (ctx->p);
    flux_future_t *f;

    ctx->moved_armed = false;
    rsa_events_flush (ctx);
    if (!(f = flux_rpc (h, "rsa.queue-moved", NULL, 0, FLUX_RPC_NORESPONSE)))
        flux_log_error (h, "rsa: sending queue-moved");
    flux_future_destroy (f);
}

/* A job left the queue: hint the service soon, if an RSA job may care. */
void rsa_queue_moved (struct rsa_ctx *ctx)
{
    if (ctx && ctx->jobs > 0 && !ctx->moved_armed) {
        ctx->moved_armed = true;
        flux_timer_watcher_reset (ctx->moved_w, MOVED_DELAY, 0.);
        flux_watcher_start (ctx->moved_w);
    }
}

/* Send the job events queued, if any (no answer: if the service is away,
 * it catches up from the journal when it comes back).
 */
void rsa_events_flush (struct rsa_ctx *ctx)
{
    flux_t *h = flux_jobtap_get_flux (ctx->p);
    flux_future_t *f;

    if (ctx->flush_armed) {
        flux_watcher_stop (ctx->flush_w);
        ctx->flush_armed = false;
    }
    if (json_array_size (ctx->events) == 0)
        return;
    if (!(f = flux_rpc_pack (h, "rsa.job-event", 0, FLUX_RPC_NORESPONSE,
                             "{s:O}", "events", ctx->events)))
        flux_log_error (h, "rsa: sending %zu job events",
                        json_array_size (ctx->events));
    flux_future_destroy (f);
    json_array_clear (ctx->events);
}

static void flush_cb (flux_reactor_t *r, flux_watcher_t *w, int revents,
                      void *arg)
{
    rsa_events_flush (arg);
}

/* Queue a job event for the service (the reference is stolen). */
void rsa_event_queue (struct rsa_ctx *ctx, json_t *event)
{
    if (!event || json_array_append_new (ctx->events, event) < 0) {
        flux_log (flux_jobtap_get_flux (ctx->p), LOG_ERR,
                  "rsa: out of memory queueing a job event");
        return;
    }
    if (json_array_size (ctx->events) >= EVENTS_MAX)
        rsa_events_flush (ctx);
    else if (!ctx->flush_armed) {
        ctx->flush_armed = true;
        flux_timer_watcher_reset (ctx->flush_w, 0., 0.);
        flux_watcher_start (ctx->flush_w);
    }
}

/* Seconds in a number or a duration string ("90", "90s", "5m", "2h",
 * "1d"), as the rsa service reads its [rsa] durations; -1 if neither.
 */
static double duration (json_t *o)
{
    static const struct {
        char unit;
        double scale;
    } units[] = {
        {'s', 1.},
        {'m', 60.},
        {'h', 3600.},
        {'d', 86400.},
    };
    const char *s;
    char *end;
    double d;

    if (json_is_number (o))
        d = json_number_value (o);
    else if ((s = json_string_value (o))) {
        while (isspace ((unsigned char)*s))
            s++;
        if (!isdigit ((unsigned char)*s))
            return -1.;
        d = strtod (s, &end);
        while (isspace ((unsigned char)*end))
            end++;
        for (size_t i = 0; i < sizeof (units) / sizeof (units[0]); i++) {
            if (*end == units[i].unit) {
                d *= units[i].scale;
                end++;
                break;
            }
        }
        while (isspace ((unsigned char)*end))
            end++;
        if (*end != '\0')
            return -1.;
    }
    else
        return -1.;
    return isfinite (d) && d >= 0. ? d : -1.;
}

/* [rsa] start-timeout and max-hold into conf, or -1 with errbuf. */
static int conf_from_rsa_table (json_t *rsa, struct rsa_conf *conf,
                                char *errbuf, size_t size)
{
    const char *keys[] = {"start-timeout", "max-hold"};
    double *values[] = {&conf->start_timeout, &conf->max_hold};

    for (int i = 0; i < 2; i++) {
        json_t *o = json_object_get (rsa, keys[i]);
        char *text;
        if (!o)
            continue;
        if ((*values[i] = duration (o)) < 0) {
            text = json_dumps (o, JSON_ENCODE_ANY | JSON_COMPACT);
            snprintf (errbuf, size,
                      "rsa: [rsa] %s: %s is not a duration "
                      "(use e.g. 60, \"90s\", \"5m\")",
                      keys[i], text ? text : "?");
            free (text);
            return -1;
        }
    }
    return 0;
}

/* conf.update (at load and on each config reload): conf is the whole
 * instance configuration.
 */
static int conf_update_cb (flux_plugin_t *p, const char *topic,
                           flux_plugin_arg_t *args, void *arg)
{
    struct rsa_ctx *ctx = rsa_ctx (p);
    struct rsa_conf conf = defaults;
    json_t *instance = NULL;
    char errbuf[256];

    if (flux_plugin_arg_unpack (args, FLUX_PLUGIN_ARG_IN, "{s:o}", "conf",
                                &instance)
        < 0)
        return flux_jobtap_error (p, args, "rsa: unpacking conf.update: %s",
                                  flux_plugin_arg_strerror (args));
    if (flux_plugin_get_conf (p)
        && flux_plugin_conf_unpack (p, "{s?F s?F s?F}", "start-timeout",
                                    &conf.start_timeout, "max-hold",
                                    &conf.max_hold, "retry", &conf.retry)
               < 0)
        return flux_jobtap_error (p, args,
                                  "rsa: plugin conf: start-timeout, max-hold "
                                  "and retry must be numbers of seconds");
    if (conf_from_rsa_table (json_object_get (instance, "rsa"), &conf, errbuf,
                             sizeof (errbuf))
        < 0)
        return flux_jobtap_error (p, args, "%s", errbuf);
    if (conf.start_timeout < 0 || conf.max_hold <= 0 || conf.retry <= 0)
        return flux_jobtap_error (
            p, args,
            "rsa: start-timeout %g, max-hold %g, retry %g:"
            " start-timeout >= 0, max-hold > 0 and "
            "retry > 0 seconds are required",
            conf.start_timeout, conf.max_hold, conf.retry);
    if (ctx->conf.start_timeout != conf.start_timeout
        || ctx->conf.max_hold != conf.max_hold || ctx->conf.retry != conf.retry)
        flux_log (flux_jobtap_get_flux (p), LOG_INFO,
                  "rsa: start-timeout=%gs max-hold=%gs retry=%gs",
                  conf.start_timeout, conf.max_hold, conf.retry);
    ctx->conf = conf;
    return 0;
}

static void ctx_destroy (void *arg)
{
    struct rsa_ctx *ctx = arg;
    if (ctx) {
        int saved_errno = errno;
        if (ctx->p)
            rsa_events_flush (ctx);
        flux_watcher_destroy (ctx->moved_w);
        flux_watcher_destroy (ctx->flush_w);
        json_decref (ctx->events);
        json_decref (ctx->writers);
        free (ctx);
        errno = saved_errno;
    }
}

static struct rsa_ctx *ctx_create (flux_plugin_t *p)
{
    flux_reactor_t *r = flux_get_reactor (flux_jobtap_get_flux (p));
    struct rsa_ctx *ctx;

    if (!(ctx = calloc (1, sizeof (*ctx))))
        return NULL;
    ctx->p = p;
    ctx->conf = defaults;
    if (!(ctx->moved_w =
              flux_timer_watcher_create (r, MOVED_DELAY, 0., moved_cb, ctx))
        || !(ctx->flush_w =
                 flux_timer_watcher_create (r, 0., 0., flush_cb, ctx))
        || !(ctx->events = json_array ()) || !(ctx->writers = json_object ())) {
        ctx_destroy (ctx);
        return NULL;
    }
    return ctx;
}

static const struct flux_plugin_handler tab[] = {
    {"conf.update", conf_update_cb, NULL},
    {"job.new", rsa_new_cb, NULL},
    {"job.state.depend", rsa_depend_cb, NULL},
    {"job.state.run", rsa_run_cb, NULL},
    {"job.event.exception", rsa_exception_cb, NULL},
    {"job.event.priority", rsa_forward_cb, NULL},
    {"job.event.flux-restart", rsa_forward_cb, NULL},
    {"job.event.alloc", rsa_forward_cb, NULL},
    {"job.event.rsa-ready", rsa_forward_cb, NULL},
    {"job.event.start", rsa_forward_cb, NULL},
    {"job.event.finish", rsa_forward_cb, NULL},
    {"job.event.clean", rsa_forward_cb, NULL},
    {"job.dependency.afterstaged", rsa_afterstaged_cb, NULL},
    {0},
};

int flux_plugin_init (flux_plugin_t *p)
{
    struct rsa_ctx *ctx;

    if (!(ctx = ctx_create (p))
        || flux_plugin_aux_set (p, CTX_AUX, ctx, ctx_destroy) < 0) {
        ctx_destroy (ctx);
        return -1;
    }
    if (flux_plugin_set_name (p, "rsa") < 0
        || flux_plugin_register (p, "rsa", tab) < 0
        || rsa_services_register (p) < 0)
        return -1;
    return 0;
}

/* vi: ts=4 sw=4 expandtab
 */
