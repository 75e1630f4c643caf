// Starts `cellspec lsp` over stdio for .cell files (see the README, "Editors").
const vscode = require("vscode");
const { LanguageClient } = require("vscode-languageclient/node");

let client;

function activate(context) {
  const [command, ...args] = vscode.workspace.getConfiguration("cellspec")
    .get("server.command", ["cellspec", "lsp"]);
  client = new LanguageClient("cellspec", "cellspec",
    { command, args, transport: 0 /* stdio */ },
    { documentSelector: [{ scheme: "file", language: "cellspec" }] });
  context.subscriptions.push(client);
  return client.start();
}

function deactivate() {
  return client ? client.stop() : undefined;
}

module.exports = { activate, deactivate };
