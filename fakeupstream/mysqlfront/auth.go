package mysqlfront

import (
	"crypto/sha1"
	"crypto/subtle"
)

// Password authentication (MY-P7). With Config.Password set, a client
// must log in as Config.User (default root) with that password, proved by
// mysql_native_password's scramble of the connection's salt; without it
// only root with an empty password is accepted (MY-P5).

// user is the account name the front accepts.
func (c *Config) user() string {
	if c.User == "" {
		return "root"
	}
	return c.User
}

// authOK reports whether (user, auth) logs in for a connection whose
// handshake sent salt.
func (c *Config) authOK(user string, auth, salt []byte) bool {
	if user != c.user() {
		return false
	}
	if c.Password == "" {
		return len(auth) == 0
	}
	want := nativeScramble(salt, c.Password)
	return subtle.ConstantTimeCompare(auth, want) == 1
}

// nativeScramble is mysql_native_password's answer to salt:
// SHA1(password) XOR SHA1(salt ‖ SHA1(SHA1(password))).
func nativeScramble(salt []byte, password string) []byte {
	h1 := sha1.Sum([]byte(password))
	h2 := sha1.Sum(h1[:])
	h := sha1.New()
	h.Write(salt)
	h.Write(h2[:])
	out := h.Sum(nil)
	for i := range out {
		out[i] ^= h1[i]
	}
	return out
}
