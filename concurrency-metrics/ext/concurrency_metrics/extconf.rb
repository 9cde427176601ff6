# frozen_string_literal: true

# Builds concurrency_metrics/native. On Ruby >= 3.2 (CRuby) it hooks the GVL instrumentation API
# (rb_internal_thread_add_event_hook); where that API is absent (Ruby 3.1, other engines) the
# extension still builds and reports `Native.hook_available? == false`, and the gem uses the
# estimate instead — one code path to install, whatever the Ruby.
require "mkmf"

have_header("ruby/thread.h")
have_func("rb_internal_thread_add_event_hook", ["ruby/thread.h"]) if RUBY_ENGINE == "ruby"
$CFLAGS << " -O2 -Wall"
create_makefile("concurrency_metrics/native")
