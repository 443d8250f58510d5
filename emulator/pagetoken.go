package emulator

import (
	"encoding/base64"
	"fmt"
	"hash/fnv"

	"google.golang.org/protobuf/proto"

	apiv1 "github.com/searchfabric/sfemu/emulator/api/v1"
)

// Page tokens (E79): next_page_token carries the last hit's sort_values
// together with a fingerprint of the query, so a token passed with another
// query is refused by name instead of silently paging the wrong ranking.

const pageTokenVersion = 1

// queryFingerprint identifies what orders and selects a search's hits: the
// request without its paging and presentation fields (limit, offset,
// min_ts, cursors, facets, highlight, keys_only), encoded deterministically.
func queryFingerprint(req *apiv1.SearchRequest) uint64 {
	q := proto.Clone(req).(*apiv1.SearchRequest)
	q.Limit, q.Offset, q.MinTs, q.SearchAfter, q.PageToken = 0, 0, 0, nil, ""
	q.Facets, q.Highlight, q.KeysOnly = nil, nil, false
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(q)
	if err != nil {
		// A request that arrived here was decoded from the wire or built
		// from valid Go values: it always encodes.
		panic(fmt.Sprintf("emulator: encoding a search request: %v", err))
	}
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

// encodePageToken is the next_page_token after a page whose last hit has
// the given sort_values.
func encodePageToken(fp uint64, after []*apiv1.Value, window int) string {
	b, err := proto.Marshal(&apiv1.PageToken{Version: pageTokenVersion, Query: fp, After: after, Window: uint32(window)})
	if err != nil {
		panic(fmt.Sprintf("emulator: encoding a page token: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodePageToken reads req.page_token and checks it belongs to req's
// query (E79).
func decodePageToken(req *apiv1.SearchRequest) (*apiv1.PageToken, error) {
	raw, err := base64.RawURLEncoding.DecodeString(req.GetPageToken())
	tok := &apiv1.PageToken{}
	if err == nil {
		err = proto.Unmarshal(raw, tok)
	}
	if err != nil || tok.GetVersion() != pageTokenVersion || len(tok.GetAfter()) == 0 {
		return nil, badQuery("page_token", "the next_page_token of a previous page", "a malformed token", "page_token is not a token this emulator issued")
	}
	if tok.GetQuery() != queryFingerprint(req) {
		return nil, badQuery("page_token", "a next_page_token issued for this query", "a token of another query",
			"page_token was issued for another query (its text, vector, filters, sort or fusion differ): send the same query as the page it came from, or start again without page_token")
	}
	return tok, nil
}
