package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/makiuchi-d/gozxing"
	"github.com/makiuchi-d/gozxing/common"
	"github.com/makiuchi-d/gozxing/common/reedsolomon"
	"github.com/makiuchi-d/gozxing/qrcode"
	"github.com/makiuchi-d/gozxing/qrcode/decoder"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The widget draws a device sign-in's verification URI as a QR code with its own
// encoder (assets/oauth-prompt.js). These tests prove the encoder by decoding what it
// draws with gozxing, a port of ZXing written apart from it: the module matrix through
// the decoder, each codeword block through its Reed–Solomon check, and the SVG the
// widget shows, rasterised, through the whole reader (finding the symbol in the image).

// qrInput is one code to draw: text, and a mask for the encoder to use instead of
// choosing one (nil: it chooses).
type qrInput struct {
	Text string `json:"text"`
	Mask *int   `json:"mask,omitempty"`
}

// drawnQR is what testdata/qr-codes.mjs prints for one input; nil when the encoder
// drew none.
type drawnQR struct {
	Version int      `json:"version"`
	Mask    int      `json:"mask"`
	Rows    []string `json:"rows"`
	SVG     *struct {
		ViewBox    string `json:"viewBox"`
		Background string `json:"background"`
		D          string `json:"d"`
	} `json:"svg"`
}

// modules returns the code's modules as rows of booleans, true for dark.
func (c *drawnQR) modules() [][]bool {
	m := make([][]bool, len(c.Rows))
	for y, row := range c.Rows {
		m[y] = make([]bool, len(row))
		for x := range row {
			m[y][x] = row[x] == '1'
		}
	}
	return m
}

// drawQRCodes runs the widget's encoder under node for inputs. Like TestJavaScript, it
// skips without node, except under CI=true, where it fails.
func drawQRCodes(t *testing.T, inputs []qrInput) []*drawnQR {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is required under CI=true to test the widget's QR codes")
		}
		t.Skip("node is not installed: the widget's QR codes are not tested")
	}
	in, err := json.Marshal(inputs)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "testdata/qr-codes.mjs")
	cmd.Env = append(os.Environ(), "NODE_OPTIONS=")
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "node testdata/qr-codes.mjs:\n%s", stderr.String())
	var codes []*drawnQR
	require.NoError(t, json.Unmarshal(out, &codes))
	require.Len(t, codes, len(inputs))
	return codes
}

// uriOfLength returns an https URI of exactly n bytes with a query of ?, &, = and %.
func uriOfLength(n int) string {
	uri := "https://auth.example.com/device?user_code=WDJB-MJHT&client_id=my%20app&x="
	for i := 0; len(uri) < n; i++ {
		uri += string("abcdefghijklmnopqrstuvwxyz0123456789%=&?"[i%40])
	}
	return uri[:n]
}

// The codes decode to the text they were drawn for, at the smallest version whose byte
// capacity at level M (the standard's Table 7) holds it, with no codeword in error.
func TestQRCodesDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		text    string
		version int
	}{
		{"https://x.co/", 1},              // 13 bytes; version 1 holds 14
		{"https://x.co/ab", 2},            // 15
		{"https://example.com/device", 2}, // 26: version 2 holds 26
		{"https://example.com/device?user_code=WDJB-MJHT", 4},
		{uriOfLength(100), 6},              // 84 < 100 <= 106
		{uriOfLength(180), 9},              // version 9 holds 180
		{uriOfLength(181), 10},             // and version 10, with a 16-bit count, 213
		{uriOfLength(250), 11},             // 213 < 250 <= 251
		{uriOfLength(300), 13},             // 287 < 300 <= 331
		{uriOfLength(412), 15},             // the most the widget draws
		{"https://例え.jp/デバイス?code=ÄÖÜ", 3}, // 42 bytes of UTF-8
	}
	inputs := make([]qrInput, len(tests))
	for i, tt := range tests {
		inputs[i] = qrInput{Text: tt.text}
	}
	codes := drawQRCodes(t, inputs)
	for i, tt := range tests {
		t.Run(fmt.Sprintf("%d bytes", len(tt.text)), func(t *testing.T) {
			code := codes[i]
			require.NotNil(t, code)
			assert.Equal(t, tt.version, code.Version)
			assertDecodes(t, code, tt.text)
			assertShown(t, code, tt.text)
		})
	}
}

// Every one of the eight masks decodes: a wrong mask pattern would invert modules
// the decoder reads as data.
func TestQRCodesDecodeUnderEveryMask(t *testing.T) {
	t.Parallel()
	text := "https://example.com/device?user_code=WDJB-MJHT&lang=en%2DGB"
	long := uriOfLength(200) // a version with version information and two block groups
	var inputs []qrInput
	for mask := range 8 {
		inputs = append(inputs, qrInput{Text: text, Mask: &mask}, qrInput{Text: long, Mask: &mask})
	}
	codes := drawQRCodes(t, inputs)
	for i, in := range inputs {
		t.Run(fmt.Sprintf("mask %d, %d bytes", *in.Mask, len(in.Text)), func(t *testing.T) {
			require.NotNil(t, codes[i])
			assert.Equal(t, *in.Mask, codes[i].Mask)
			assertDecodes(t, codes[i], in.Text)
		})
	}
}

// A text longer than version 15 holds is not drawn, nor shown.
func TestQRCodesTooLong(t *testing.T) {
	t.Parallel()
	codes := drawQRCodes(t, []qrInput{{Text: uriOfLength(413)}, {Text: uriOfLength(2000)}})
	assert.Nil(t, codes[0])
	assert.Nil(t, codes[1])
}

// assertDecodes decodes code's module matrix and checks it reads as text, as drawn
// (not mirrored), with its format information as the standard's Table C.1 gives it in
// both copies, either copy enough on its own, and no codeword in error.
func assertDecodes(t *testing.T, code *drawnQR, text string) {
	t.Helper()
	m := code.modules()
	size := 17 + 4*code.Version
	require.Len(t, m, size)
	for _, row := range m {
		require.Len(t, row, size)
	}
	assertFunctionPatterns(t, m)
	res := decodeModules(t, m)
	require.NotNil(t, res)
	assert.Equal(t, text, res.GetText())
	assert.Equal(t, [][]byte{[]byte(text)}, res.GetByteSegments(), "one byte-mode segment of the UTF-8")
	assert.Equal(t, "M", res.GetECLevel())
	if meta, ok := res.GetOther().(*decoder.QRCodeDecoderMetaData); ok {
		assert.False(t, meta.IsMirrored(), "read only as its mirror image")
	}

	first, second := formatCopies(m)
	assert.Equal(t, levelMFormat[code.Mask], first, "format information around the top-left finder")
	assert.Equal(t, levelMFormat[code.Mask], second, "format information by the other finders")
	assertEachCopyDecodes(t, m, text, formatCopyModules(size), "format information")
	if code.Version >= 7 {
		assertEachCopyDecodes(t, m, text, versionCopyModules(size), "version information")
	}
	assertCodewords(t, m, code, text)
}

// assertFunctionPatterns checks what a decoder given the modules need not look at: the
// finder patterns with their light separators, the timing patterns between them, the
// module beside the bottom-left finder that is always dark, and the alignment patterns
// where gozxing's table of versions puts them.
func assertFunctionPatterns(t *testing.T, m [][]bool) {
	t.Helper()
	size := len(m)
	for _, corner := range [][2]int{{0, 0}, {size - 7, 0}, {0, size - 7}} {
		for dy := -1; dy <= 7; dy++ {
			for dx := -1; dx <= 7; dx++ {
				x, y := corner[0]+dx, corner[1]+dy
				if x < 0 || y < 0 || x >= size || y >= size {
					continue
				}
				ring := max(abs(2*dx-6), abs(2*dy-6)) / 2 // 0 at the centre, 4 on the separator
				assert.Equal(t, ring != 2 && ring != 4, m[y][x], "finder module (%d, %d)", x, y)
			}
		}
	}
	for i := 8; i < size-8; i++ {
		assert.Equal(t, i%2 == 0, m[6][i], "horizontal timing module %d", i)
		assert.Equal(t, i%2 == 0, m[i][6], "vertical timing module %d", i)
	}
	assert.True(t, m[size-8][8], "the dark module")
	version, err := decoder.Version_GetProvisionalVersionForDimension(size)
	require.NoError(t, err)
	centres := version.GetAlignmentPatternCenters()
	for _, cy := range centres {
		for _, cx := range centres {
			if (cx < 9 && cy < 9) || (cx > size-9 && cy < 9) || (cx < 9 && cy > size-9) {
				continue // where a finder is
			}
			for dy := -2; dy <= 2; dy++ {
				for dx := -2; dx <= 2; dx++ {
					assert.Equal(t, max(abs(dx), abs(dy)) != 1, m[cy+dy][cx+dx], "alignment module (%d, %d)", cx+dx, cy+dy)
				}
			}
		}
	}
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// decodeModules reads a module matrix with gozxing's decoder, or returns nil.
func decodeModules(t *testing.T, m [][]bool) *common.DecoderResult {
	t.Helper()
	res, err := decoder.NewDecoder().DecodeBoolMap(m, nil)
	if err != nil {
		t.Logf("decode: %v", err)
		return nil
	}
	return res
}

// levelMFormat is the standard's Table C.1 for level M: the 15 format bits (error
// correction level, mask, BCH code, XOR 101010000010010) for masks 0 to 7.
var levelMFormat = [8]int{
	0b101010000010010, 0b101000100100101, 0b101111001111100, 0b101101101001011,
	0b100010111111001, 0b100000011001110, 0b100111110010111, 0b100101010100000,
}

// formatCopyModules returns where the standard puts format bits 14 (the most
// significant) down to 0, as [x, y], in the first copy and in the second.
func formatCopyModules(size int) [2][][2]int {
	at := [2][][2]int{make([][2]int, 15), make([][2]int, 15)}
	for i := range 15 {
		bit := 14 - i
		switch {
		case bit < 6:
			at[0][i] = [2]int{8, bit}
		case bit < 8:
			at[0][i] = [2]int{8, bit + 1}
		case bit == 8:
			at[0][i] = [2]int{7, 8}
		default:
			at[0][i] = [2]int{14 - bit, 8}
		}
		if bit < 8 {
			at[1][i] = [2]int{size - 1 - bit, 8}
		} else {
			at[1][i] = [2]int{8, size - 15 + bit}
		}
	}
	return at
}

// versionCopyModules returns the modules of the two copies of the version information.
func versionCopyModules(size int) [2][][2]int {
	at := [2][][2]int{make([][2]int, 18), make([][2]int, 18)}
	for i := range 18 {
		at[0][i] = [2]int{size - 11 + i%3, i / 3}
		at[1][i] = [2]int{i / 3, size - 11 + i%3}
	}
	return at
}

func formatCopies(m [][]bool) (first, second int) {
	at := formatCopyModules(len(m))
	for i := range 15 {
		first = first<<1 | bit(m, at[0][i])
		second = second<<1 | bit(m, at[1][i])
	}
	return first, second
}

func bit(m [][]bool, at [2]int) int {
	if m[at[1]][at[0]] {
		return 1
	}
	return 0
}

// assertEachCopyDecodes inverts one copy of some information at a time: the decoder
// must still read the code from the other copy, so each copy is whole and in its place.
func assertEachCopyDecodes(t *testing.T, m [][]bool, text string, copies [2][][2]int, what string) {
	t.Helper()
	for c, modules := range copies {
		spoilt := make([][]bool, len(m))
		for y := range m {
			spoilt[y] = append([]bool(nil), m[y]...)
		}
		for _, at := range modules {
			spoilt[at[1]][at[0]] = !spoilt[at[1]][at[0]]
		}
		res := decodeModules(t, spoilt)
		if assert.NotNil(t, res, "%s copy %d inverted", what, c+1) {
			assert.Equal(t, text, res.GetText())
		}
	}
}

// assertCodewords reads the codewords with gozxing's parser, splits them into its
// blocks, and checks that every block is a Reed–Solomon codeword, and that the data
// codewords hold the byte-mode segment, the terminator and the pad codewords the
// standard prescribes, in that order.
func assertCodewords(t *testing.T, m [][]bool, code *drawnQR, text string) {
	t.Helper()
	bits, err := gozxing.ParseBoolMapToBitMatrix(m)
	require.NoError(t, err)
	parser, err := decoder.NewBitMatrixParser(bits)
	require.NoError(t, err)
	version, err := parser.ReadVersion()
	require.NoError(t, err)
	format, err := parser.ReadFormatInformation()
	require.NoError(t, err)
	assert.Equal(t, code.Mask, int(format.GetDataMask()))
	raw, err := parser.ReadCodewords()
	require.NoError(t, err)
	blocks, err := decoder.DataBlock_GetDataBlocks(raw, version, format.GetErrorCorrectionLevel())
	require.NoError(t, err)
	field := reedsolomon.GenericGF_QR_CODE_FIELD_256
	var data []byte
	for i, b := range blocks {
		words := make([]int, len(b.GetCodewords()))
		for j, w := range b.GetCodewords() {
			words[j] = int(w)
		}
		poly, err := reedsolomon.NewGenericGFPoly(field, words)
		require.NoError(t, err)
		// A block is a Reed–Solomon codeword when its polynomial vanishes at the
		// generator's roots, 2^0 to 2^(n-1). (The decoder's own correction is no check:
		// it passes some blocks it cannot correct as they are.)
		for k := range len(words) - b.GetNumDataCodewords() {
			assert.Zero(t, poly.EvaluateAt(field.Exp(k)), "block %d, syndrome %d", i, k)
		}
		data = append(data, b.GetCodewords()[:b.GetNumDataCodewords()]...)
	}
	assert.Equal(t, expectedData(text, code.Version, len(data)), data)
}

// expectedData is the standard's data codewords for text alone in byte mode: mode 0100,
// the byte count (8 bits to version 9, 16 from 10), the bytes, a terminator of up to
// four 0 bits, 0 bits to the byte, then 11101100 and 00010001 in turn.
func expectedData(text string, version, capacity int) []byte {
	var bits []byte
	put := func(v, n int) {
		for i := n - 1; i >= 0; i-- {
			bits = append(bits, byte(v>>i&1))
		}
	}
	countBits := 16
	if version <= 9 {
		countBits = 8
	}
	put(0b0100, 4)
	put(len(text), countBits)
	for _, b := range []byte(text) {
		put(int(b), 8)
	}
	put(0, min(4, 8*capacity-len(bits)))
	put(0, (8-len(bits)%8)%8)
	var data []byte
	for i := 0; i < len(bits); i += 8 {
		var b byte
		for _, x := range bits[i : i+8] {
			b = b<<1 | x
		}
		data = append(data, b)
	}
	for pad := 0; len(data) < capacity; pad++ {
		data = append(data, [2]byte{0xec, 0x11}[pad%2])
	}
	return data
}

// svgRun is one rectangle of the widget's QR path: a run of dark modules in a row.
var svgRun = regexp.MustCompile(`M(\d+) (\d+)h(\d+)v1h-(\d+)z`)

// assertShown checks the QR code the device view draws for text: the same modules
// inside a light margin of four, which gozxing's reader finds and reads in a picture
// of the SVG at 3 pixels a module.
func assertShown(t *testing.T, code *drawnQR, text string) {
	t.Helper()
	require.NotNil(t, code.SVG, "the device view shows a QR code")
	size := len(code.Rows)
	n := size + 8
	assert.Equal(t, fmt.Sprintf("0 0 %d %d", n, n), code.SVG.ViewBox)
	assert.Equal(t, "#fff", code.SVG.Background)
	assert.Equal(t, code.SVG.D, strings.Join(svgRun.FindAllString(code.SVG.D, -1), ""), "only runs in the path")

	const scale = 3
	img := image.NewGray(image.Rect(0, 0, n*scale, n*scale))
	for i := range img.Pix {
		img.Pix[i] = 0xff
	}
	drawn := make([][]bool, n)
	for y := range drawn {
		drawn[y] = make([]bool, n)
	}
	for _, r := range svgRun.FindAllStringSubmatch(code.SVG.D, -1) {
		x, y, w := atoi(t, r[1]), atoi(t, r[2]), atoi(t, r[3])
		require.Equal(t, r[3], r[4])
		for i := x; i < x+w; i++ {
			drawn[y][i] = true
			for py := y * scale; py < (y+1)*scale; py++ {
				for px := i * scale; px < (i+1)*scale; px++ {
					img.SetGray(px, py, color.Gray{})
				}
			}
		}
	}
	m := code.modules()
	for y := range n {
		for x := range n {
			inside := x >= 4 && y >= 4 && x < size+4 && y < size+4
			assert.Equal(t, inside && m[y-4][x-4], drawn[y][x], "module (%d, %d) of the picture", x, y)
		}
	}
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	require.NoError(t, err)
	res, err := qrcode.NewQRCodeReader().Decode(bmp, nil)
	require.NoError(t, err, "the reader finds the QR code in the picture")
	assert.Equal(t, text, res.GetText())
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	require.NoError(t, err)
	return n
}
