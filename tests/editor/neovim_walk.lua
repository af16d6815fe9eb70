-- Neovim's own LSP client (vim.lsp, Neovim 0.7 and later) against `kdsl lsp` over stdio.
--
-- Opens KDSL_NVIM_FILE, starts the server command KDSL_NVIM_SERVER (a JSON list), and writes
-- what the server answered to KDSL_NVIM_OUT as JSON: every publishDiagnostics for the file,
-- a hover on the kernel's name, `kdsl/capabilities` sent as Neovim sends a request with no
-- arguments (no `params` member at all), and `kdsl/stages`. tests/editor/test_neovim.py
-- asserts on that file. Whatever happens, the script writes the file and quits Neovim.

local file = os.getenv('KDSL_NVIM_FILE')
local out = os.getenv('KDSL_NVIM_OUT')
local timeout_ms = tonumber(os.getenv('KDSL_NVIM_TIMEOUT_MS') or '60000')
local report = { publications = {} }

local function answer(client, method, params, bufnr)
  local response, err = client.request_sync(method, params, timeout_ms, bufnr)
  if response == nil then
    return { error = tostring(err) }
  end
  return { error = response.err, result = response.result }
end

local function hover_text(hover)
  local contents = hover.result and hover.result.contents
  if type(contents) == 'table' then
    return contents.value or ''
  end
  return ''
end

local function walk()
  vim.cmd('edit ' .. vim.fn.fnameescape(file))
  local bufnr = vim.api.nvim_get_current_buf()
  local uri = vim.uri_from_bufnr(bufnr)
  local client_id = vim.lsp.start_client({
    name = 'kdsl',
    cmd = vim.fn.json_decode(os.getenv('KDSL_NVIM_SERVER')),
    root_dir = vim.fn.fnamemodify(file, ':h'),
    handlers = {
      ['textDocument/publishDiagnostics'] = function(err, result, ctx, config)
        if result and result.uri == uri then
          table.insert(report.publications, result)
        end
        return vim.lsp.diagnostic.on_publish_diagnostics(err, result, ctx, config)
      end,
    },
  })
  assert(client_id, 'the server did not start')
  vim.lsp.buf_attach_client(bufnr, client_id)
  local client = vim.lsp.get_client_by_id(client_id)
  report.initialized = vim.wait(timeout_ms, function() return client.initialized end, 50)

  -- The compiler's diagnostics: wait for a publication with the block-size contract error.
  report.diagnostics_arrived = vim.wait(timeout_ms, function()
    for _, publication in ipairs(report.publications) do
      for _, d in ipairs(publication.diagnostics) do
        if d.code == 'DSL202' then return true end
      end
    end
    return false
  end, 50)

  -- The kernel's hover shows its lowered MLIR once the compiler tier has answered for the file.
  local kernel_def = { line = 7, character = 5 } -- `saxpy` in `def saxpy(` (0-based)
  local hover
  vim.wait(timeout_ms, function()
    hover = answer(client, 'textDocument/hover', { textDocument = { uri = uri }, position = kernel_def }, bufnr)
    return hover.error ~= nil or hover_text(hover):find('lowered MLIR', 1, true) ~= nil
  end, 200)
  report.hover = hover

  report.capabilities = answer(client, 'kdsl/capabilities', nil, bufnr)
  report.stages = answer(client, 'kdsl/stages', { uri = uri }, bufnr)

  client.stop()
  report.stopped = vim.wait(10000, function() return client.is_stopped() end, 50)
end

local ok, err = pcall(walk)
if not ok then
  report.script_error = tostring(err)
end
vim.fn.writefile({ vim.fn.json_encode(report) }, out)
vim.cmd('qall!')
