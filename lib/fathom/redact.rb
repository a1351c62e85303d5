# frozen_string_literal: true

require_relative "options"

module Fathom
  # Credentials taken out of text before it reaches a message, a log line
  # or stats: the secrets Fathom sends (a push token, a password, the
  # basic-auth value), credentials anyone's text may hold (an echoed
  # `Authorization`, a URL's user:password@), and only then the text cut
  # to a message's length. In that order: cut first, a secret cut in half
  # is no longer the secret and would be printed (`Bearer tok_SECRET_0123…`).
  module Redact
    MARK = "[redacted]"
    # An Authorization value, whoever's: the scheme kept, the credential
    # not (a token or base64 never holds a space). A credential is taken
    # to have 8 characters or more with a digit or one of + / = _ in them,
    # so that a server's prose ("basic authentication required") stays
    # readable; Fathom's own secrets are replaced whatever they look like.
    SCHEME_CREDENTIAL = %r{\b(Bearer|Basic|Token|Digest|Negotiate)([ \t]+)
                           (?=[A-Za-z0-9._~+/=:%\-]*[0-9+/=_])[A-Za-z0-9._~+/=:%\-]{8,}}inx.freeze
    # A URL's userinfo: everything from "//" to the last "@" of the word,
    # so that a password with an unescaped "/", "#", "?", ":" or "@" is
    # never half shown (the RFC's parse would end it at the first "/").
    URL_USERINFO = %r{(//)[^\s"'<>]*@}n.freeze

    module_function

    # `text` made fit for a one-line message of at most `max` characters
    # (Options.clean), with every credential replaced first. `secrets`:
    # the values Fathom sent; each is also matched percent-encoded, and
    # `cut: true` says that `text` is the start of something longer (a
    # bounded read), so a secret's beginning at its very end is dropped.
    def message(text, secrets: [], max: 200, cut: false)
      Options.clean(text(text, secrets: secrets, cut: cut), max)
    end

    # The same without the cut to a message's length (still raw bytes
    # otherwise: control characters are the caller's).
    def text(text, secrets: [], cut: false)
      out = text.to_s.b
      forms = secret_forms(secrets)
      forms.each { |secret| out = out.gsub(secret, MARK) }
      out = out.gsub(SCHEME_CREDENTIAL) { "#{$1}#{$2}#{MARK}" }
      out = out.gsub(URL_USERINFO) { "#{$1}***@" }
      out = drop_secret_start(out, forms) if cut
      out.force_encoding(Encoding::UTF_8)
    end

    # A URL setting's value with its userinfo removed, for a message about
    # a value that may not even parse: everything between the scheme's
    # "://" (or the start) and the value's last "@" is replaced, whatever
    # it holds (a password with a space, a "/" or an "@" in it).
    def url(text)
      text = text.to_s.b
      at = text.rindex("@") or return text.force_encoding(Encoding::UTF_8)

      scheme = text.index("://")
      from = scheme && scheme < at ? scheme + 3 : 0
      "#{text.byteslice(0, from)}***#{text.byteslice(at..)}".force_encoding(Encoding::UTF_8)
    end

    # Each secret (binary), and its percent-encoded form when that differs
    # (a server may echo a URL or a form), longest first so that a secret
    # holding another is replaced whole.
    def secret_forms(secrets)
      forms = secrets.compact.map { |s| s.to_s.b }.reject(&:empty?)
      forms += forms.map { |s| percent_encoded(s) }
      forms.uniq.sort_by { |s| -s.bytesize }
    end

    def percent_encoded(bytes)
      bytes.gsub(/[^A-Za-z0-9\-._~]/n) { |c| format("%%%02X", c.ord) }
    end

    # Drops the end of `out` when it is the beginning of a secret (any
    # length: even a few characters of a token are not to be shown).
    def drop_secret_start(out, forms)
      forms.each do |secret|
        (secret.bytesize - 1).downto(1) do |n|
          next unless out.end_with?(secret.byteslice(0, n))

          out = "#{out.byteslice(0, out.bytesize - n)}#{MARK}".b
          break
        end
      end
      out
    end
  end
end
