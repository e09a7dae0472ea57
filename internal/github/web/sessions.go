package web

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/perfgate/perfgate/internal/store"
)

// Sessions live in the store (store.Sessions), so a restart keeps people
// signed in and any replica serves any browser. What the database holds
// opens nothing by itself:
//
//   - the browser's session id, 32 random bytes, only as its SHA-256;
//   - the person's GitHub token sealed with AES-256-GCM under a key
//     derived from the link-signing key (dashboard.signing_key, or the
//     webhook secret it is derived from), which lives where the app's
//     private key and OAuth client secret do (the data directory, the
//     environment), never in the database. Every replica has it, as they
//     must to honour each other's signed links; changing it signs
//     everyone out.
//
// What GitHub said about a repository is cached per replica (AccessTTL):
// a cache, not state, so a replica that never saw a session asks GitHub
// once.

// sessionPurgeEvery bounds how often expired sessions are deleted; it is
// done on a sign-in or a rotation, never on a plain page view.
const sessionPurgeEvery = 10 * time.Minute

// session is one signed-in browser, as read from the store for one
// request.
type session struct {
	id      int64
	login   string
	token   string
	expires time.Time
	rotated time.Time // when the current id was issued
	idHash  string    // the hash of the id this request came with
}

type accessEntry struct {
	ok    bool
	until time.Time
}

// sessions reads and writes sessions through the store and keeps this
// replica's access answers.
type sessions struct {
	st   store.Sessions
	aead cipher.AEAD
	log  zerolog.Logger

	mu        sync.Mutex
	access    map[int64]map[string]accessEntry
	lastPurge time.Time
}

// newSessions seals tokens under a key derived from key (the link
// signer's), so the two never coincide.
func newSessions(st store.Sessions, key []byte, log zerolog.Logger) (*sessions, error) {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("perfgate sign-in session token sealing key"))
	block, err := aes.NewCipher(m.Sum(nil))
	if err != nil {
		return nil, fmt.Errorf("web: session key: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("web: session key: %w", err)
	}
	return &sessions{st: st, aead: aead, log: log, access: map[int64]map[string]accessEntry{}}, nil
}

// hashID is what the store keeps of a session id.
func hashID(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// seal encrypts token, bound to login (a sealed token copied to another
// row does not open).
func (ss *sessions) seal(login, token string) ([]byte, error) {
	nonce := make([]byte, ss.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("seal the session token: %w", err)
	}
	return ss.aead.Seal(nonce, nonce, []byte(token), []byte("perfgate session of "+login)), nil
}

var errUnsealable = errors.New("the session's token does not open under this server's key (the link-signing key changed?)")

func (ss *sessions) open(login string, sealed []byte) (string, error) {
	n := ss.aead.NonceSize()
	if len(sealed) < n {
		return "", errUnsealable
	}
	plain, err := ss.aead.Open(nil, sealed[:n], sealed[n:], []byte("perfgate session of "+login))
	if err != nil {
		return "", errUnsealable
	}
	return string(plain), nil
}

// get is the live session id opens, or nil.
func (ss *sessions) get(ctx context.Context, id string, now time.Time) (*session, error) {
	h := hashID(id)
	rec, err := ss.st.SessionByToken(ctx, h, now)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	token, err := ss.open(rec.Login, rec.TokenSealed)
	if err != nil {
		// Signed out here, but not deleted: a replica with the wrong key
		// (a key being changed) must not end the others' sessions. The
		// row expires and is purged like any other.
		return nil, fmt.Errorf("session of %s: %w", rec.Login, err)
	}
	return &session{id: rec.ID, login: rec.Login, token: token, expires: rec.ExpiresAt, rotated: rec.RotatedAt, idHash: h}, nil
}

// create starts a session and returns the id for the browser.
func (ss *sessions) create(ctx context.Context, login, token string, now time.Time) (string, time.Time, error) {
	ss.purge(ctx, now)
	id, err := randomToken(32)
	if err != nil {
		return "", time.Time{}, err
	}
	sealed, err := ss.seal(login, token)
	if err != nil {
		return "", time.Time{}, err
	}
	rec, err := ss.st.CreateSession(ctx, hashID(id), store.Session{Login: login, TokenSealed: sealed, CreatedAt: now, ExpiresAt: now.Add(SessionTTL)})
	if err != nil {
		return "", time.Time{}, err
	}
	return id, rec.ExpiresAt, nil
}

// rotate gives s a new id, the one it came with lasting rotateGrace
// more. It returns "" when another request rotated it first: the browser
// gets that one's id.
func (ss *sessions) rotate(ctx context.Context, s *session, now time.Time) (string, error) {
	ss.purge(ctx, now)
	id, err := randomToken(32)
	if err != nil {
		return "", err
	}
	ok, err := ss.st.RotateSession(ctx, s.id, s.idHash, hashID(id), now, now.Add(rotateGrace))
	if err != nil || !ok {
		return "", err
	}
	s.rotated = now
	return id, nil
}

// drop ends session id everywhere.
func (ss *sessions) drop(ctx context.Context, id int64) error {
	ss.mu.Lock()
	delete(ss.access, id)
	ss.mu.Unlock()
	return ss.st.DeleteSession(ctx, id)
}

// purge deletes expired sessions from the store and stale answers from
// the cache, at most once per sessionPurgeEvery.
func (ss *sessions) purge(ctx context.Context, now time.Time) {
	ss.mu.Lock()
	if now.Sub(ss.lastPurge) < sessionPurgeEvery {
		ss.mu.Unlock()
		return
	}
	ss.lastPurge = now
	for id, m := range ss.access {
		for repo, e := range m {
			if !now.Before(e.until) {
				delete(m, repo)
			}
		}
		if len(m) == 0 {
			delete(ss.access, id)
		}
	}
	ss.mu.Unlock()
	// Best effort: an expired row opens nothing anyway.
	if n, err := ss.st.PurgeSessions(ctx, now); err != nil {
		ss.log.Warn().Err(err).Msg("sign-in: purge expired sessions")
	} else if n > 0 {
		ss.log.Debug().Int64("sessions", n).Msg("sign-in: expired sessions purged")
	}
}

// cachedAccess is this replica's answer on repo for session id, if fresh.
func (ss *sessions) cachedAccess(id int64, repo string, now time.Time) (may, ok bool) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	e, ok := ss.access[id][repo]
	if !ok || !now.Before(e.until) {
		return false, false
	}
	return e.ok, true
}

func (ss *sessions) rememberAccess(id int64, repo string, may bool, until time.Time) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	m := ss.access[id]
	if m == nil {
		m = map[string]accessEntry{}
		ss.access[id] = m
	}
	m[repo] = accessEntry{ok: may, until: until}
}
