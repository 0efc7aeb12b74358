// Prints, for TestQRCodesDecode (qr_test.go), the QR codes the widget draws. It reads a
// JSON array of {text, mask?} on stdin and writes a JSON array of {version, mask, rows,
// svg}: rows the modules from OAuthFlow.qrCode(text, mask), "1" for dark, and svg the
// viewBox and path data of the QR code the device view shows for a sign-in whose
// verification URI is text (null when it shows none).
import fs from "node:fs";
import { makeBrowser } from "./fakedom.mjs";

const b = makeBrowser();
b.load("oauth-prompt.js");
const flow = b.window.OAuthFlow;

function shown(text) {
  const root = b.document.createElement("section");
  b.document.body.appendChild(root);
  flow.renderPrompt(root, { provider: "p", userCode: "C", verificationUri: text, status: "pending" }, {}).destroy();
  const image = root.byAttr("data-role", "qr");
  b.document.body.removeChild(root);
  if (!image) return null;
  const [rect, path] = image.childNodes;
  return { viewBox: image.getAttribute("viewBox"), background: rect.getAttribute("fill"), d: path.getAttribute("d") };
}

const out = JSON.parse(fs.readFileSync(0, "utf8")).map(({ text, mask }) => {
  const code = flow.qrCode(text, mask);
  if (!code) return null;
  return {
    version: code.version,
    mask: code.mask,
    rows: code.modules.map((row) => row.map((dark) => (dark ? "1" : "0")).join("")),
    svg: mask === undefined ? shown(text) : null,
  };
});
process.stdout.write(JSON.stringify(out));
