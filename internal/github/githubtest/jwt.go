package githubtest

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// verifyAppJWT checks an app JWT the way GitHub does: RS256 signed by the
// app's key, issued by the app, not expired, and valid for at most 10 minutes.
func verifyAppJWT(token string, pub *rsa.PublicKey, appID int64, now time.Time) error {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return errors.New("not a JWT")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if err := decodeSegment(parts[0], &header); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if header.Alg != "RS256" {
		return fmt.Errorf("alg %q, want RS256", header.Alg)
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return fmt.Errorf("signature encoding: %w", err)
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return errors.New("signature does not match the app's key")
	}
	var claims struct {
		Iss json.RawMessage `json:"iss"`
		Iat int64           `json:"iat"`
		Exp int64           `json:"exp"`
	}
	if err := decodeSegment(parts[1], &claims); err != nil {
		return fmt.Errorf("claims: %w", err)
	}
	iss := strings.Trim(string(claims.Iss), `"`)
	if iss != strconv.FormatInt(appID, 10) {
		return fmt.Errorf("iss %s, want %d", iss, appID)
	}
	if claims.Exp <= now.Unix() {
		return errors.New("expired")
	}
	if claims.Iat > now.Unix()+60 {
		return errors.New("issued in the future")
	}
	if claims.Exp-claims.Iat > 600 {
		return errors.New("valid for more than 10 minutes")
	}
	return nil
}

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(seg)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// wrappedBase64 encodes like the contents API: base64 with a newline every
// 60 characters.
func wrappedBase64(b []byte) string {
	enc := base64.StdEncoding.EncodeToString(b)
	var sb strings.Builder
	for len(enc) > 60 {
		sb.WriteString(enc[:60])
		sb.WriteByte('\n')
		enc = enc[60:]
	}
	sb.WriteString(enc)
	sb.WriteByte('\n')
	return sb.String()
}

// jwtIssuer reads the unverified iss claim (the app ID), to pick the key
// that must have signed the token.
func jwtIssuer(token string) int64 {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return 0
	}
	var claims struct {
		Iss json.RawMessage `json:"iss"`
	}
	if decodeSegment(parts[1], &claims) != nil {
		return 0
	}
	id, _ := strconv.ParseInt(strings.Trim(string(claims.Iss), `"`), 10, 64)
	return id
}
