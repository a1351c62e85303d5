# frozen_string_literal: true

require_relative "options"
require_relative "redact"

module Fathom
  # The FATHOM_* environment variables as text. Their bytes are whatever
  # the environment holds: a value that is not UTF-8 used to raise
  # `ArgumentError: invalid byte sequence in UTF-8` from deep inside a
  # parser (a split, a strip, a regexp), naming nothing. Every reader of a
  # FATHOM_* setting goes through here, so such a value is an
  # ArgumentError naming the variable and showing its bytes escaped
  # ("\xFF"), and fathom/setup, the Railtie and `fathom run` report it on
  # one line and run the program unprofiled, as for any bad setting.
  module EnvText
    # Never shown, not even in this error: the bytes are the secret.
    SECRET = %w[FATHOM_PUSH_TOKEN FATHOM_PUSH_PASSWORD FATHOM_RACK_TOKEN].freeze
    # Shown without their userinfo (a password).
    URLS = %w[FATHOM_PUSH].freeze

    module_function

    # The value of `name` in `env` (ENV or a Hash of the same shape) as
    # UTF-8 text, or nil when unset.
    def fetch(env, name)
      value = env[name]
      return nil if NilClass === value
      raise TypeError, "fathom: #{name} must be a String, got #{Options.describe(value)}" unless String === value

      text = value.dup.force_encoding(Encoding::UTF_8)
      return text if text.valid_encoding?

      raise ArgumentError, "fathom: #{name} holds bytes that are not UTF-8: #{shown(name, value)}"
    end

    # name -> the value, nil when unset or blank.
    def reader(env)
      lambda do |name|
        value = fetch(env, name)
        value && !value.strip.empty? ? value : nil
      end
    end

    # The bytes, escaped as a String#inspect of binary shows them
    # ("a\xFFb"), cut to a message's length; never a secret's.
    def shown(name, value)
      return "(not shown: it is a secret)" if SECRET.include?(name)

      bytes = URLS.include?(name) ? Redact.url(value.b).b : value.b
      Options.clean(bytes.inspect, 120)
    end
  end
end
