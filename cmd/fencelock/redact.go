package main

import (
	"net/url"
	"strings"
)

// redactedURL returns the URL with any password replaced by "xxxxx".
func redactedURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(invalid URL)"
	}
	return redact(u)
}

// redact returns u with the password of its userinfo, and the value of
// every query option that may hold a secret (see secretKey), replaced by
// "xxxxx".
func redact(u *url.URL) string {
	r := *u
	r.RawQuery = redactQuery(u.RawQuery)
	shown := r.Redacted()
	for _, pw := range querySecrets(u.RawQuery) { // given to another option too
		shown = strings.ReplaceAll(shown, pw, "xxxxx")
	}
	return shown
}

// redactQuery masks the values of raw's secret options and keeps the
// rest as written. It splits at ";" too, and reads keys whose escapes do
// not decode as written: a query that url.ParseQuery refuses, and so
// drops pairs of, must not show a password that it dropped.
func redactQuery(raw string) string {
	var b strings.Builder
	for raw != "" {
		pair, rest := raw, ""
		if i := strings.IndexAny(raw, "&;"); i >= 0 {
			pair, rest = raw[:i], raw[i:]
		}
		if k, _, ok := strings.Cut(pair, "="); ok && secretKey(k) {
			pair = k + "=xxxxx"
		}
		b.WriteString(pair)
		if rest != "" {
			b.WriteByte(rest[0])
			rest = rest[1:]
		}
		raw = rest
	}
	return b.String()
}

// secretKey reports whether the query option key may hold a secret:
// password= (go-redis's, for Sentinel), and whatever a user may have
// meant as one (Password=, sentinel_password=, auth=...), in any case.
func secretKey(key string) bool {
	if k, err := url.QueryUnescape(key); err == nil {
		key = k
	}
	key = strings.ToLower(key)
	return strings.Contains(key, "pass") || strings.Contains(key, "secret") || strings.Contains(key, "auth")
}

// querySecrets returns the values of raw's secret options, as written
// and decoded, for masking in messages that may repeat them.
func querySecrets(raw string) []string {
	var secrets []string
	for pair := range strings.FieldsFuncSeq(raw, func(r rune) bool { return r == '&' || r == ';' }) {
		k, v, ok := strings.Cut(pair, "=")
		if !ok || !secretKey(k) || v == "" {
			continue
		}
		secrets = append(secrets, v)
		if d, err := url.QueryUnescape(v); err == nil && d != v && d != "" {
			secrets = append(secrets, d)
		}
	}
	return secrets
}
