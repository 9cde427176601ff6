# frozen_string_literal: true

require "rbconfig"
require "tmpdir"
require "fileutils"

LIB = File.expand_path("../lib", __dir__)
$LOAD_PATH.unshift(LIB)

# Builds the C extension the way `gem install` does (extconf.rb, make) with the Ruby running the
# tests, once per run, into a temporary directory put on the load path.
module NativeBuild
  module_function

  def dir
    @dir ||= build
  end

  def build
    out = Dir.mktmpdir("cm-native")
    ext = File.expand_path("../ext/concurrency_metrics", __dir__)
    Dir.chdir(out) do
      ok = system(RbConfig.ruby, File.join(ext, "extconf.rb"), out: File::NULL) &&
           system("make", "-s", out: File::NULL, err: File::NULL)
      raise "the C extension did not build (#{out})" unless ok
    end
    lib = File.join(out, "lib")
    FileUtils.mkdir_p(File.join(lib, "concurrency_metrics"))
    FileUtils.cp(File.join(out, "native.#{RbConfig::CONFIG['DLEXT']}"), File.join(lib, "concurrency_metrics"))
    # After the tests (minitest runs them from its own at_exit, which would come after ours).
    defined?(Minitest) ? Minitest.after_run { FileUtils.rm_rf(out) } : at_exit { FileUtils.rm_rf(out) }
    lib
  end
end
$LOAD_PATH.unshift(NativeBuild.dir)

require "concurrency_metrics"

module Work
  module_function

  # Real Ruby computation until this thread has used `seconds` of CPU.
  def cpu(seconds)
    deadline = ConcurrencyMetrics::Timing.thread_cpu + seconds
    x = 0
    x = (x * 31 + 7) % 1_000_003 while ConcurrencyMetrics::Timing.thread_cpu < deadline
    x
  end

  def hook?
    ConcurrencyMetrics::Gvl.hook_unavailable_reason.nil?
  end

  # The default: read in estimate mode, where the file exists.
  def runqueue_source
    !hook? && ConcurrencyMetrics::RunQueue.available? ? "schedstat" : "none"
  end
end
