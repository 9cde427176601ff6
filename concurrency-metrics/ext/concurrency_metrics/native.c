/*
 * Per-thread GVL timers from the GVL instrumentation API (Ruby >= 3.2), the approach of
 * Shopify's gvltools and jhawthorn's gvl_timing: each native thread keeps, in thread-local
 * storage, the nanoseconds it spent
 *   - waiting for the GVL: READY (wants it) -> RESUMED (got it), and
 *   - off the GVL, blocked: SUSPENDED (released it) -> READY (wants it back): I/O, sleep,
 *     waiting on a mutex or a connection pool — anything that does not need the GVL.
 * The hook runs on the thread whose state changes, possibly without the GVL, so it only reads
 * the clock and writes this thread's own variables (no Ruby API, no locks). Ruby code reads the
 * calling thread's totals and diffs them around a request.
 *
 * Thread-local storage is per native thread: under Ruby 3.3's M:N scheduler
 * (RUBY_MN_THREADS=1) Ruby threads share native threads, so the Ruby side does not use the hook
 * there (it falls back to the estimate).
 */
#include <ruby.h>
#include <stdint.h>
#include <time.h>

#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
#include <ruby/thread.h>

static rb_internal_thread_event_hook_t *cm_hook = NULL;

static _Thread_local uint64_t cm_ready_at = 0;
static _Thread_local uint64_t cm_suspended_at = 0;
static _Thread_local uint64_t cm_gvl_wait_ns = 0;
static _Thread_local uint64_t cm_idle_ns = 0;

static inline uint64_t cm_now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void cm_callback(rb_event_flag_t event, const rb_internal_thread_event_data_t *data, void *user) {
    uint64_t now = cm_now_ns();
    switch (event) {
    case RUBY_INTERNAL_THREAD_EVENT_SUSPENDED:
        cm_suspended_at = now;
        break;
    case RUBY_INTERNAL_THREAD_EVENT_READY:
        if (cm_suspended_at) {
            cm_idle_ns += now - cm_suspended_at;
            cm_suspended_at = 0;
        }
        cm_ready_at = now;
        break;
    case RUBY_INTERNAL_THREAD_EVENT_RESUMED:
        if (cm_ready_at) {
            cm_gvl_wait_ns += now - cm_ready_at;
            cm_ready_at = 0;
        }
        break;
    }
}

static VALUE cm_hook_available_p(VALUE mod) { return Qtrue; }

static VALUE cm_enable(VALUE mod) {
    if (!cm_hook) {
        cm_hook = rb_internal_thread_add_event_hook(
            cm_callback,
            RUBY_INTERNAL_THREAD_EVENT_READY | RUBY_INTERNAL_THREAD_EVENT_RESUMED |
                RUBY_INTERNAL_THREAD_EVENT_SUSPENDED,
            NULL);
    }
    return Qtrue;
}

static VALUE cm_disable(VALUE mod) {
    if (cm_hook) {
        rb_internal_thread_remove_event_hook(cm_hook);
        cm_hook = NULL;
    }
    return Qtrue;
}

static VALUE cm_enabled_p(VALUE mod) { return cm_hook ? Qtrue : Qfalse; }

/* [gvl_wait_ns, idle_ns] of the calling thread since it started (monotonic). */
static VALUE cm_thread_times(VALUE mod) {
    return rb_assoc_new(ULL2NUM(cm_gvl_wait_ns), ULL2NUM(cm_idle_ns));
}

#else

static VALUE cm_hook_available_p(VALUE mod) { return Qfalse; }

static VALUE cm_unavailable(VALUE mod) {
    rb_raise(rb_eNotImpError, "this Ruby has no GVL instrumentation API (rb_internal_thread_add_event_hook, Ruby >= 3.2)");
    return Qnil;
}

#define cm_enable cm_unavailable
#define cm_disable cm_unavailable
#define cm_thread_times cm_unavailable
static VALUE cm_enabled_p(VALUE mod) { return Qfalse; }

#endif

void Init_native(void) {
    VALUE mCM = rb_define_module("ConcurrencyMetrics");
    VALUE mNative = rb_define_module_under(mCM, "Native");
    rb_define_singleton_method(mNative, "hook_available?", cm_hook_available_p, 0);
    rb_define_singleton_method(mNative, "enable", cm_enable, 0);
    rb_define_singleton_method(mNative, "disable", cm_disable, 0);
    rb_define_singleton_method(mNative, "enabled?", cm_enabled_p, 0);
    rb_define_singleton_method(mNative, "thread_times", cm_thread_times, 0);
}
