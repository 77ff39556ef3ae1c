package oauth

import "testing"

// TestDialGuardEmbeddedIPv4: an IPv6 address that carries an IPv4 one
// (NAT64, 6to4, IPv4-compatible) is of the IPv4 address's class, and
// 0.0.0.0/8 is the host: a document naming [64:ff9b::a9fe:a9fe] does not
// reach cloud metadata through a NAT64 translator from a public anchor.
func TestDialGuardEmbeddedIPv4(t *testing.T) {
	public := &dialGuard{anchor: "93.184.216.34"}
	for addr, ok := range map[string]bool{
		"[64:ff9b::a9fe:a9fe]:80":   false, // 169.254.169.254
		"[64:ff9b::7f00:1]:443":     false, // 127.0.0.1
		"[64:ff9b::a00:1]:443":      false, // 10.0.0.1
		"[64:ff9b:1::a00:1]:443":    false, // a site's translator
		"[2002:7f00:1::1]:443":      false, // 6to4 of 127.0.0.1
		"[::a9fe:a9fe]:80":          false, // IPv4-compatible
		"0.1.2.3:80":                false,
		"[::ffff:0:a9fe:a9fe]:80":   false, // IPv4-translated 169.254.169.254
		"192.0.0.192:80":            false, // a cloud's metadata address once
		"[fec0::1]:443":             false, // site-local
		"[2001:0:4136:e378::1]:443": false, // Teredo
		"239.1.2.3:443":             false, // multicast
		"[ff02::1]:443":             false,
		"198.18.0.1:443":            true, // benchmarking: public, as for the egress proxy
		"[64:ff9b::5db8:d822]:443":  true, // 93.184.216.34
		"[2002:5db8:d822::1]:443":   true,
		"[2001:4860:4860::8888]:53": true,
	} {
		if err := public.control("tcp", addr, nil); (err == nil) != ok {
			t.Errorf("public anchor, %s: %v, want allowed %v", addr, err, ok)
		}
	}
}
