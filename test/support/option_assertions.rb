# frozen_string_literal: true

# The contract of every option check: the error class, a one-line message
# that starts with "fathom: " and names the option.
module OptionAssertions
  def assert_option_error(klass, name, &block)
    error = assert_raises(klass, &block)
    assert error.message.start_with?("fathom: "), error.message
    assert_match(/(?<![\w-])#{Regexp.escape(name)}(?![\w-])/, error.message, "the message does not name #{name}")
    assert_equal 1, error.message.lines.size, error.message
    error
  end
end
