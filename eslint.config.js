import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "node_modules/**", ".tmp/**", "**/*.js"] },
  {
    files: ["**/*.ts"],
    extends: [tseslint.configs.base],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: {
      // A floating promise in a durable runtime is a lost step.
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: false }],
      "@typescript-eslint/await-thenable": "error",
    },
  },
  {
    // src/ is the package: it never reaches into the repository's tools.
    files: ["src/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { patterns: [{ regex: "(^|/)tools/", message: "src/ is the product: it does not import tools/." }] }],
    },
  },
  {
    // The tools use Cairn as a user would, through its entry points; the internals they need go
    // through tools/internal.ts, the one file that names them.
    files: ["tools/**/*.ts"],
    ignores: ["tools/internal.ts"],
    rules: {
      "no-restricted-imports": [
        "error",
        {
          patterns: [
            {
              regex: "^(\\.\\./)+src/(?!(index|ai/index|testing/index)\\.js$)",
              message:
                "tools/ import only src/index.js, src/ai/index.js and src/testing/index.js; any other piece of src/ goes through tools/internal.ts.",
            },
          ],
        },
      ],
    },
  },
);
