package codec

import (
	"bytes"
	"fmt"
	"strings"
)

// SortKey returns the bytes TiDB writes into index keys and common handles
// for a string under new collation (rule K11): binary and *_0900_bin (NO
// PAD) keep the bytes; the PAD SPACE *_bin collations drop trailing spaces.
// Case-insensitive and unicode collations need TiDB's weight tables and are
// refused with an error rather than guessed.
func SortKey(collation string, s []byte) ([]byte, error) {
	c := strings.ToLower(collation)
	switch c {
	case "binary", "utf8mb4_0900_bin", "":
		return s, nil
	case "utf8mb4_bin", "utf8_bin", "ascii_bin", "latin1_bin":
		return bytes.TrimRight(s, " "), nil
	}
	return nil, fmt.Errorf("codec: sort key for collation %q is not supported", collation)
}
