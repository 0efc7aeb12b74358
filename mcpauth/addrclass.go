package mcpauth

import "net/netip"

// addrClass is what kind of network an IP address belongs to, for the
// outbound policy.
type addrClass int

const (
	addrPublic   addrClass = iota // reachable on the internet: allowed
	addrLoopback                  // this machine: for a loopback URL host, or AllowPrivateNetworks
	addrPrivate                   // RFC 1918, shared (CGNAT), unique local: AllowPrivateNetworks only
	addrNever                     // link-local, unspecified, multicast, reserved, documentation: never
)

// specialPrefixes are the IANA special-purpose ranges that netip's own
// predicates do not name, each with its class.
var specialPrefixes = []struct {
	prefix netip.Prefix
	class  addrClass
}{
	{netip.MustParsePrefix("0.0.0.0/8"), addrNever},        // "this network"
	{netip.MustParsePrefix("100.64.0.0/10"), addrPrivate},  // shared address space (carrier-grade NAT)
	{netip.MustParsePrefix("192.0.0.0/24"), addrNever},     // IETF protocol assignments
	{netip.MustParsePrefix("192.0.2.0/24"), addrNever},     // documentation
	{netip.MustParsePrefix("192.88.99.0/24"), addrNever},   // 6to4 relay anycast
	{netip.MustParsePrefix("198.18.0.0/15"), addrNever},    // benchmarking
	{netip.MustParsePrefix("198.51.100.0/24"), addrNever},  // documentation
	{netip.MustParsePrefix("203.0.113.0/24"), addrNever},   // documentation
	{netip.MustParsePrefix("240.0.0.0/4"), addrNever},      // reserved, and the broadcast address
	{netip.MustParsePrefix("::/96"), addrNever},            // IPv4-compatible (deprecated)
	{netip.MustParsePrefix("64:ff9b:1::/48"), addrPrivate}, // local-use NAT64
	{netip.MustParsePrefix("100::/64"), addrNever},         // discard-only
	{netip.MustParsePrefix("2001::/23"), addrNever},        // IETF protocol assignments (Teredo among them)
	{netip.MustParsePrefix("2001:db8::/32"), addrNever},    // documentation
	{netip.MustParsePrefix("2002::/16"), addrNever},        // 6to4: an IPv4 address inside
	{netip.MustParsePrefix("fec0::/10"), addrPrivate},      // site-local (deprecated)
}

// nat64 is the well-known NAT64 prefix: its addresses stand for the IPv4
// address in their last 32 bits.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// nat64Local is the /96 of the local-use NAT64 prefix (RFC 8215), where an
// address stands for the IPv4 address in its last 32 bits. Elsewhere in
// 64:ff9b:1::/48 where the IPv4 address sits depends on the site's prefix
// length (RFC 6052 §2.2), so those addresses are private, as a whole.
var nat64Local = netip.MustParsePrefix("64:ff9b:1::/96")

// classify says which kind of network ip is on. An IPv4-mapped IPv6
// address, and a NAT64 one, is classed as the IPv4 address it carries; a
// local-use NAT64 one is private, or never when what it carries is.
func classify(ip netip.Addr) addrClass {
	ip = ip.Unmap().WithZone("")
	if nat64.Contains(ip) {
		b := ip.As16()
		return classify(netip.AddrFrom4([4]byte(b[12:])))
	}
	if nat64Local.Contains(ip) {
		b := ip.As16()
		return max(addrPrivate, classify(netip.AddrFrom4([4]byte(b[12:])))) // a site's own translator: private at least
	}
	switch {
	case !ip.IsValid(), ip.IsUnspecified(), ip.IsLinkLocalUnicast(), ip.IsMulticast():
		return addrNever
	case ip.IsLoopback():
		return addrLoopback
	case ip.IsPrivate():
		return addrPrivate
	}
	for _, s := range specialPrefixes {
		if s.prefix.Contains(ip) {
			return s.class
		}
	}
	if !ip.IsGlobalUnicast() {
		return addrNever
	}
	return addrPublic
}
