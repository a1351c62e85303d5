# frozen_string_literal: true

require "stringio"
require "fathom/cli"

# Runs the `fathom` command in this process (fast enough to call thousands
# of times), with stdout and stderr captured. `fathom run` never execs: once
# its checks pass it returns 0 and keeps the environment it would have set.
module CLIRunner
  class NoExecCLI < Fathom::CLI
    attr_reader :exec_env

    private

    def exec_command(env, _argv)
      @exec_env = env
      0
    end
  end

  Result = Struct.new(:status, :out, :err, :env)

  module_function

  def run_cli(*args)
    out = StringIO.new(+"")
    err = StringIO.new(+"")
    cli = NoExecCLI.new(stdout: out, stderr: err)
    status = cli.run(args)
    Result.new(status, out.string, err.string, cli.exec_env)
  end
end
