# frozen_string_literal: true

# Sets environment variables for the length of a block (nil unsets one)
# and puts back what was there, also when the block raises.
module EnvVars
  def with_env(vars)
    old = vars.to_h { |k, _| [k, ENV[k]] }
    vars.each { |k, v| ENV[k] = v }
    yield
  ensure
    old.each { |k, v| ENV[k] = v }
  end
end
