package proxy

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// urlParams are the parameters each scheme of an upstream URL accepts
// (ParseUpstream). Any other is an error: a parameter the proxy ignored
// (a password given as ?password=) would fail later and far from its
// cause, and could not be told from a secret when the URL is logged.
var urlParams = map[string][]string{
	"redis":    {"db"},
	"rediss":   {"db"},
	"unix":     {"db"},
	"sentinel": {"sentinel_password"},
}

// publicParams are the parameters whose values RedactURL shows: none of
// them is a secret.
var publicParams = []string{"db"}

// checkParams returns an error naming the first parameter of query that
// scheme does not accept, and the ones it does; s is the URL, named
// redacted. A parameter without a value is not named: it may be a
// secret put in the wrong place.
func checkParams(s, scheme, query string) error {
	if _, err := url.ParseQuery(query); err != nil {
		return fmt.Errorf("upstream URL %q: parameters: %w", RedactURL(s), err)
	}
	accepted := urlParams[scheme]
	for _, p := range strings.Split(query, "&") {
		rawName, _, hasValue := strings.Cut(p, "=")
		name, _ := url.QueryUnescape(rawName) // ParseQuery took it
		if p == "" || slices.Contains(accepted, name) {
			continue
		}
		what := fmt.Sprintf("%q", name)
		if !hasValue {
			what = "without a value (not shown: it may be a secret)"
		}
		return fmt.Errorf("upstream URL %q: unknown parameter %s; a %s:// URL accepts %s",
			RedactURL(s), what, scheme, strings.Join(accepted, ", "))
	}
	return nil
}

// plainURLError returns err without the URL a url.Error names, which may
// hold a password: the caller names the URL redacted.
func plainURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// RedactURL returns the URL s with its secrets replaced by ***, for logs,
// errors and the profiler's command line: the password of its user
// information, and the value of every parameter but db (sentinel_password,
// and any a mistyped URL carries). A string that is not a URL passes
// unchanged.
//
// The user information runs to the last @ of the whole string, as a
// password may hold any character: where a parameter's value holds an @,
// more than the password is hidden, never less.
func RedactURL(s string) string {
	sch := strings.Index(s, "://")
	if sch < 0 {
		return s
	}
	head, rest := s[:sch+3], s[sch+3:]
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		user := rest[:at]
		if i := strings.IndexByte(user, ':'); i >= 0 {
			user = user[:i] + ":***"
		} else {
			user = "***"
		}
		head, rest = head+user+"@", rest[at+1:]
	}
	addr, query, ok := strings.Cut(rest, "?")
	if !ok {
		return head + rest
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		name, _, hasValue := strings.Cut(p, "=")
		switch {
		case slices.Contains(publicParams, name):
		case hasValue:
			params[i] = name + "=***"
		case p != "":
			params[i] = "***" // a value without a name, perhaps a secret
		}
	}
	return head + addr + "?" + strings.Join(params, "&")
}
