export declare const importBoundaryOptions: {
  zones: Record<string, string[]>;
  entryOnly: string[];
  open: string[];
  lazy: Record<string, string[]>;
};
