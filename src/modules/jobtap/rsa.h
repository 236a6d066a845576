/* rsa.h - what the files of the rsa jobtap plugin share.
 *
 *   rsa.c         the plugin's context, its configuration, the handler
 *                 table and the queue-moved hint
 *   job.c         RSA jobs: followed for the service, held at start
 *   rpc.c         job-manager.rsa.{answer,offer,withdraw,post}
 *   afterstaged.c the afterstaged dependency scheme, and the same wait
 *                 for a job whose data_in another RSA job's stage-out
 *                 is still writing
 */

#ifndef RSA_JOBTAP_RSA_H
#define RSA_JOBTAP_RSA_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>
#include <flux/core.h>
#include <flux/jobtap.h>

#define PROLOG_NAME "rsa"
#define JOB_AUX "rsa::job" /* struct rsa_job of a job */
#define CTX_AUX "rsa::ctx" /* struct rsa_ctx of the plugin */

struct rsa_conf {
    double start_timeout; /* keep retrying an unreachable service */
    double max_hold;      /* the longest a start waits for its answer */
    double retry;         /* between attempts */
};

/* Everything the plugin keeps between callbacks (the plugin's aux). */
struct rsa_ctx {
    flux_plugin_t *p;
    struct rsa_conf conf;    /* as of the last conf.update */
    int jobs;                /* active jobs that mention rsa */
    flux_watcher_t *moved_w; /* an rsa.queue-moved hint is due */
    bool moved_armed;
    json_t *events;          /* job events for the service, not sent yet */
    flux_watcher_t *flush_w; /* sends them at the reactor's next turn */
    bool flush_armed;
    json_t *writers; /* {"<id>": data_out} of ended jobs whose
                                 * stage-out may still write there (the
                                 * service's job-manager.rsa.writers) */
};

enum phase { IDLE, HOLDING, DONE };

struct rsa_job {
    struct rsa_ctx *ctx;
    flux_plugin_t *p;
    flux_jobid_t id;
    char idf58[32];
    uint32_t userid;
    enum phase phase;
    bool eligible;           /* attrs is an object: the RSA manages it */
    json_t *attrs;           /* attributes.system.rsa */
    flux_future_t *f;        /* rsa.start in flight */
    flux_watcher_t *retry_w; /* next rsa.start attempt */
    flux_watcher_t *hold_w;  /* max-hold watchdog */
    double t_first;          /* first attempt (for start-timeout) */
    char *ranks;             /* the job's broker ranks (an idset), from R */
    json_t *offer;           /* env to start with at once, or NULL */
    bool offer_used;         /* the job started with the offer */
    bool ended;              /* clean: no longer counted in ctx->jobs */
    json_t *submit;          /* its submit event until it is sent */
};

/* rsa.c */
struct rsa_ctx *rsa_ctx (flux_plugin_t *p);
void rsa_queue_moved (struct rsa_ctx *ctx);
void rsa_event_queue (struct rsa_ctx *ctx, json_t *event);
void rsa_events_flush (struct rsa_ctx *ctx);

/* job.c: job.new, job.state.depend, job.state.run, job.event.exception,
 * other job.event.* */
int rsa_new_cb (flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args,
                void *arg);
int rsa_depend_cb (flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args,
                   void *arg);
int rsa_run_cb (flux_plugin_t *p, const char *topic, flux_plugin_arg_t *args,
                void *arg);
int rsa_exception_cb (flux_plugin_t *p, const char *topic,
                      flux_plugin_arg_t *args, void *arg);
int rsa_forward_cb (flux_plugin_t *p, const char *topic,
                    flux_plugin_arg_t *args, void *arg);
int rsa_release_job (struct rsa_job *job, json_t *env, int status);
void rsa_tell (flux_plugin_t *p, flux_jobid_t id);

/* rpc.c */
int rsa_services_register (flux_plugin_t *p);

/* afterstaged.c: job.dependency.afterstaged; from job.state.depend, the
 * wait of a job whose data_in is another RSA job's data_out */
int rsa_afterstaged_cb (flux_plugin_t *p, const char *topic,
                        flux_plugin_arg_t *args, void *arg);
int rsa_inputs_wait (struct rsa_job *job, flux_plugin_arg_t *args);

#endif /* !RSA_JOBTAP_RSA_H */

/* vi: ts=4 sw=4 expandtab
 */
