package store

import (
	"net/url"
	"strings"
)

// secretParams are query parameters whose values are credentials: libpq
// and pgx accept a password in the query string as well as in the user
// info, and URLs in logs sometimes carry tokens.
var secretParams = map[string]bool{
	"password": true, "sslpassword": true, "pass": true, "pwd": true,
	"token": true, "access_token": true, "secret": true, "api_key": true, "apikey": true, "key": true,
}

// Redact hides the credentials of a DSN or URL for logs: the password of
// the user info and the values of password-like query parameters. A SQLite
// path is returned as it is.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		// Unparseable: keep the scheme and host hint only if there is no
		// password-looking part at all.
		if strings.Contains(strings.ToLower(dsn), "password") || strings.Contains(dsn, "@") {
			return "<unparseable DSN, redacted>"
		}
		return dsn
	}
	if u.User != nil {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = "<redacted>"
		} else {
			changed := false
			for k := range q {
				if secretParams[strings.ToLower(k)] {
					q.Set(k, "xxxxx")
					changed = true
				}
			}
			if changed {
				u.RawQuery = q.Encode()
			}
		}
	}
	return u.String()
}
