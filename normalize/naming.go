package normalize

import (
	"strings"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// PartitionName is the source_partition of one table path (N1): the
// physical table id, prefixed with the keyspace when one is set. Physical
// partitions of a partitioned table are separate source partitions (N2).
func PartitionName(keyspaceID uint32, physicalTableID int64) string {
	return apiv1.PartitionName(keyspaceID, physicalTableID)
}

// maxCollectionName is the contract's limit (E3).
const maxCollectionName = 128

// DefaultCollectionName derives a collection name from the lower-case
// database and table names (N3): "<db>.<table>", bytes outside
// [A-Za-z0-9_.-] replaced by '_', cut to 128 bytes.
func DefaultCollectionName(db, table string) string {
	return SanitizeCollectionName(strings.ToLower(db) + "." + strings.ToLower(table))
}

// SanitizeCollectionName forces s into the contract's name alphabet (E3).
func SanitizeCollectionName(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == '-'
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) > maxCollectionName {
		b = b[:maxCollectionName]
	}
	if len(b) == 0 {
		return "_"
	}
	return string(b)
}
