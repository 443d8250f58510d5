package mysqlfront

import (
	"bytes"
	"fmt"
)

// ServerVersion is what the handshake and VERSION() announce: TiDB's form,
// so clients that sniff "TiDB" in the version take their TiDB paths (MY-P1).
const ServerVersion = "8.0.11-TiDB-v8.5.0-sfemu"

// VersionComment answers @@version_comment (the mysql CLI prints it).
const VersionComment = "TiDB Server (sfemu embedded upstream), MySQL 8.0 compatible"

// Capability flags (protocol 41).
const (
	capLongPassword     uint32 = 1
	capFoundRows        uint32 = 2
	capLongFlag         uint32 = 4
	capConnectWithDB    uint32 = 8
	capNoSchema         uint32 = 16
	capODBC             uint32 = 64
	capLocalFiles       uint32 = 128
	capIgnoreSpace      uint32 = 256
	capProtocol41       uint32 = 512
	capInteractive      uint32 = 1024
	capSSL              uint32 = 2048
	capTransactions     uint32 = 8192
	capSecureConn       uint32 = 32768
	capMultiStatements  uint32 = 1 << 16
	capMultiResults     uint32 = 1 << 17
	capPluginAuth       uint32 = 1 << 19
	capConnectAttrs     uint32 = 1 << 20
	capPluginAuthLenenc uint32 = 1 << 21
)

// serverCaps is what the handshake announces: no SSL, no compression, no
// DEPRECATE_EOF (result sets always end column definitions and rows with
// EOF packets).
const serverCaps = capLongPassword | capFoundRows | capLongFlag | capConnectWithDB | capNoSchema |
	capODBC | capIgnoreSpace | capProtocol41 | capInteractive | capTransactions | capSecureConn |
	capMultiStatements | capMultiResults | capPluginAuth | capConnectAttrs | capPluginAuthLenenc

// Server status flags.
const (
	statusInTrans     uint16 = 1
	statusAutocommit  uint16 = 2
	statusMoreResults uint16 = 8
)

// Commands.
const (
	comQuit         = 0x01
	comInitDB       = 0x02
	comQuery        = 0x03
	comFieldList    = 0x04
	comPing         = 0x0e
	comStmtPrepare  = 0x16
	comStmtExecute  = 0x17
	comStmtClose    = 0x19
	comStmtReset    = 0x1a
	comResetConnect = 0x1f
)

// Collation ids the front announces.
const (
	collationUTF8MB4Bin = 46
	collationBinary     = 63
)

const nativePassword = "mysql_native_password"

// handshakeV10 builds the initial handshake packet.
func handshakeV10(connID uint32, salt []byte) []byte {
	b := []byte{10}
	b = append(b, ServerVersion...)
	b = append(b, 0)
	b = appendUint32(b, connID)
	b = append(b, salt[:8]...)
	b = append(b, 0)
	b = appendUint16(b, uint16(serverCaps&0xffff))
	b = append(b, collationUTF8MB4Bin)
	b = appendUint16(b, statusAutocommit)
	b = appendUint16(b, uint16(serverCaps>>16))
	b = append(b, byte(len(salt)+1))
	b = append(b, make([]byte, 10)...)
	b = append(b, salt[8:]...)
	b = append(b, 0)
	b = append(b, nativePassword...)
	return append(b, 0)
}

// handshakeResponse is the client's HandshakeResponse41.
type handshakeResponse struct {
	caps       uint32
	maxPacket  uint32
	charset    byte
	user       string
	authResp   []byte
	db         string
	plugin     string
	sslRequest bool
}

// parseHandshakeResponse decodes HandshakeResponse41; it never panics and
// names the field that was malformed (MY-P4).
func parseHandshakeResponse(b []byte) (handshakeResponse, error) {
	r := &reader{b: b, what: "handshake response"}
	var h handshakeResponse
	h.caps = r.uint32()
	if r.err == nil && h.caps&capProtocol41 == 0 {
		return h, fmt.Errorf("client does not speak protocol 4.1 (capabilities 0x%08x)", h.caps)
	}
	h.maxPacket = r.uint32()
	h.charset = r.byte1()
	r.bytes(23)
	if r.err != nil {
		return h, r.err
	}
	if r.left() == 0 && h.caps&capSSL != 0 {
		h.sslRequest = true
		return h, nil
	}
	h.user = string(r.nulString())
	switch {
	case h.caps&capPluginAuthLenenc != 0:
		h.authResp = r.lenEncString()
	case h.caps&capSecureConn != 0:
		h.authResp = r.bytes(int(r.byte1()))
	default:
		h.authResp = r.nulString()
	}
	if h.caps&capConnectWithDB != 0 && r.left() > 0 {
		h.db = string(r.nulString())
	}
	if h.caps&capPluginAuth != 0 && r.left() > 0 {
		h.plugin = string(r.nulString())
	}
	if h.caps&capConnectAttrs != 0 && r.left() > 0 {
		n := r.lenEncInt()
		if r.err == nil && n > uint64(r.left()) {
			r.fail("connection attributes of %d bytes, %d left", n, r.left())
		}
		attrs := &reader{b: r.bytes(int(n)), what: "connection attributes"}
		for attrs.err == nil && attrs.left() > 0 {
			attrs.lenEncString()
			attrs.lenEncString()
		}
		if attrs.err != nil {
			return h, attrs.err
		}
	}
	return h, r.err
}

func okPacket(affected, lastInsertID uint64, status uint16, info string) []byte {
	b := []byte{0x00}
	b = appendLenEncInt(b, affected)
	b = appendLenEncInt(b, lastInsertID)
	b = appendUint16(b, status)
	b = appendUint16(b, 0)
	return append(b, info...)
}

func eofPacket(status uint16) []byte {
	b := []byte{0xfe, 0, 0}
	return appendUint16(b, status)
}

func errPacket(e *Error) []byte {
	b := []byte{0xff}
	b = appendUint16(b, e.Code)
	b = append(b, '#')
	state := e.State
	if len(state) != 5 {
		state = "HY000"
	}
	b = append(b, state...)
	return append(b, e.Message...)
}

// authSwitchRequest asks the client to answer with mysql_native_password.
func authSwitchRequest(salt []byte) []byte {
	b := []byte{0xfe}
	b = append(b, nativePassword...)
	b = append(b, 0)
	b = append(b, salt...)
	return append(b, 0)
}

// column is one column definition of a result set.
type column struct {
	schema, table, orgTable, name, orgName string
	charset                                uint16
	length                                 uint32
	tp                                     byte
	flags                                  uint16
	decimals                               byte
}

func (c *column) definition() []byte {
	b := appendLenEncString(nil, []byte("def"))
	b = appendLenEncString(b, []byte(c.schema))
	b = appendLenEncString(b, []byte(c.table))
	b = appendLenEncString(b, []byte(c.orgTable))
	b = appendLenEncString(b, []byte(c.name))
	b = appendLenEncString(b, []byte(c.orgName))
	b = append(b, 0x0c)
	b = appendUint16(b, c.charset)
	b = appendUint32(b, c.length)
	b = append(b, c.tp)
	b = appendUint16(b, c.flags)
	b = append(b, c.decimals)
	return append(b, 0, 0)
}

// textRow encodes one row of the text protocol: NULL is 0xfb, every other
// value a length-encoded string.
func textRow(cells [][]byte) []byte {
	var b []byte
	for _, c := range cells {
		if c == nil {
			b = append(b, 0xfb)
			continue
		}
		b = appendLenEncString(b, c)
	}
	return b
}

// cleanString drops NULs from names echoed into error texts.
func cleanString(b []byte) string { return string(bytes.ReplaceAll(b, []byte{0}, nil)) }
