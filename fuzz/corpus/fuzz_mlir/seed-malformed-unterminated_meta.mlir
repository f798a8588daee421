module {}
{-#
  dialect_resources: {
